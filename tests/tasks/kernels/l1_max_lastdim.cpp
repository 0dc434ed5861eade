// Honest l1_max_lastdim (float32): the row's largest value.
#include "kernelsage_cpu.h"
#include <cmath>
#include <cstdint>

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    const int64_t n = inputs[0].shape[inputs[0].ndim - 1];
    const int64_t rows = ks_numel(&inputs[0]) / n;
    const float* x = (const float*)inputs[0].data;
    float* y = (float*)outputs[0].data;
    for (int64_t r = 0; r < rows; ++r) {
        const float* row = x + r * n;
        float top = row[0];
        for (int64_t j = 1; j < n; ++j) top = row[j] > top ? row[j] : top;
        y[r] = top;
    }
    return 0;
}
