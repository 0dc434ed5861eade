// Honest l1_argmax_lastdim (float32): the first index of the row's largest value.
#include "kernelsage_cpu.h"
#include <cmath>
#include <cstdint>

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    const int64_t n = inputs[0].shape[inputs[0].ndim - 1];
    const int64_t rows = ks_numel(&inputs[0]) / n;
    const float* x = (const float*)inputs[0].data;
    int64_t* y = (int64_t*)outputs[0].data;
    for (int64_t r = 0; r < rows; ++r) {
        const float* row = x + r * n;
        float best = row[0];
        int64_t where = 0;
        for (int64_t j = 1; j < n; ++j)
            if (row[j] > best) { best = row[j]; where = j; }
        y[r] = where;
    }
    return 0;
}
