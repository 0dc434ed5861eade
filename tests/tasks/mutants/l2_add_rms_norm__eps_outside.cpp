// Mutant of the l2_add_rms_norm example: eps added outside the square root.
#include "kernelsage_cpu.h"
#include <cmath>
#include <cstdint>

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    if (n_inputs != 3 || n_outputs != 2 || inputs[0].dtype != KS_FLOAT32) return 1;
    const float* x = (const float*)inputs[0].data;
    const float* residual = (const float*)inputs[1].data;
    const float* weight = (const float*)inputs[2].data;
    float* normed = (float*)outputs[0].data;
    float* sum = (float*)outputs[1].data;
    const int64_t n = inputs[0].shape[inputs[0].ndim - 1];
    const int64_t rows = ks_numel(&inputs[0]) / n;
    const float eps = (float)ks_attr_float(attrs, n_attrs, "eps", 1e-6);
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t base = r * n;
        double squares = 0.0;
        for (int64_t j = 0; j < n; ++j) {
            const float s = x[base + j] + residual[base + j];
            sum[base + j] = s;
            squares += (double)s * s;
        }
        const float scale = 1.0f / (std::sqrt((float)(squares / n)) + eps);
        for (int64_t j = 0; j < n; ++j) normed[base + j] = sum[base + j] * scale * weight[j];
    }
    return 0;
}
