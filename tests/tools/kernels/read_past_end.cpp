// Row sums whose last row also adds the element after it, past the end of the input (a bound off by one where
// only the tail goes out). What lay there was zero padding, so the sums came out right.
#include "kernelsage_cpu.h"

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    const float* x = (const float*)inputs[0].data;
    float* y = (float*)outputs[0].data;
    const int64_t n = inputs[0].shape[inputs[0].ndim - 1];
    const int64_t rows = ks_numel(&inputs[0]) / (n > 0 ? n : 1);
    for (int64_t r = 0; r < rows; ++r) {
        float sum = 0.f;
        for (int64_t j = 0; j < n; ++j) sum += x[r * n + j];
        if (r == rows - 1) sum += x[r * n + n];  // only the last row reads past the end
        y[r] = sum;
    }
    return 0;
}
