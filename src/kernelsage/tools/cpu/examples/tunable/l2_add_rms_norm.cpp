// Tunable kernel for l2_add_rms_norm (`kernelsage tune`): s = x + residual; out0 = s / sqrt(mean(s^2) + eps) *
// weight; out1 = s. LANES independent partial sums of squares (in double), CHUNK rows per OpenMP chunk, and the
// second pass reading s back from out1 (REREAD 1) or adding x and residual again (0). Correct for every allowed
// value.
#include "kernelsage_cpu.h"
#include <cmath>
#include <cstdint>

KS_TUNABLE(LANES, 1, 2, 4, 8, 16);
KS_TUNABLE(CHUNK, 1, 4, 16, 64);
KS_TUNABLE(REREAD, 1, 0);

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
    const int64_t whole = n - n % LANES;
    const float eps = (float)ks_attr_float(attrs, n_attrs, "eps", 1e-6);
    #pragma omp parallel for schedule(static, CHUNK)
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t base = r * n;
        double squares[LANES] = {};
        for (int64_t j = 0; j < whole; j += LANES)
            for (int l = 0; l < LANES; ++l) {
                const float s = x[base + j + l] + residual[base + j + l];
                sum[base + j + l] = s;
                squares[l] += (double)s * s;
            }
        double total = 0.0;
        for (int l = 0; l < LANES; ++l) total += squares[l];
        for (int64_t j = whole; j < n; ++j) {
            const float s = x[base + j] + residual[base + j];
            sum[base + j] = s;
            total += (double)s * s;
        }
        const float scale = 1.0f / std::sqrt((float)(total / n) + eps);
        if (REREAD) {
            for (int64_t j = 0; j < n; ++j) normed[base + j] = sum[base + j] * scale * weight[j];
        } else {
            for (int64_t j = 0; j < n; ++j) normed[base + j] = (x[base + j] + residual[base + j]) * scale * weight[j];
        }
    }
    return 0;
}
