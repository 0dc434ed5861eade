// Tunable kernel for l2_softmax (`kernelsage tune`): softmax over the last dimension with LANES independent
// partial maxima and sums (they let the compiler vectorise the reductions), CHUNK rows per OpenMP chunk, and the
// exponentials either kept in the output (STORE_EXP 1) or computed again in the last pass (0). Correct for every
// allowed value.
#include "kernelsage_cpu.h"
#include <cmath>
#include <cstdint>

KS_TUNABLE(LANES, 1, 2, 4, 8, 16);
KS_TUNABLE(CHUNK, 1, 2, 4, 8, 16, 64);
KS_TUNABLE(STORE_EXP, 1, 0);

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    if (n_inputs != 1 || n_outputs != 1 || inputs[0].dtype != KS_FLOAT32) return 1;
    const float* x = (const float*)inputs[0].data;
    float* y = (float*)outputs[0].data;
    const int64_t n = inputs[0].shape[inputs[0].ndim - 1];
    const int64_t rows = ks_numel(&inputs[0]) / n;
    const int64_t whole = n - n % LANES;
    #pragma omp parallel for schedule(static, CHUNK)
    for (int64_t r = 0; r < rows; ++r) {
        const float* in = x + r * n;
        float* out = y + r * n;
        float tops[LANES];
        for (int l = 0; l < LANES; ++l) tops[l] = in[0];
        for (int64_t j = 0; j < whole; j += LANES)
            for (int l = 0; l < LANES; ++l) tops[l] = in[j + l] > tops[l] ? in[j + l] : tops[l];
        float top = tops[0];
        for (int l = 1; l < LANES; ++l) top = tops[l] > top ? tops[l] : top;
        for (int64_t j = whole; j < n; ++j) top = in[j] > top ? in[j] : top;
        float sums[LANES] = {};
        for (int64_t j = 0; j < whole; j += LANES)
            for (int l = 0; l < LANES; ++l) {
                const float e = std::exp(in[j + l] - top);
                if (STORE_EXP) out[j + l] = e;
                sums[l] += e;
            }
        float total = 0.0f;
        for (int l = 0; l < LANES; ++l) total += sums[l];
        for (int64_t j = whole; j < n; ++j) {
            const float e = std::exp(in[j] - top);
            if (STORE_EXP) out[j] = e;
            total += e;
        }
        const float inverse = 1.0f / total;
        if (STORE_EXP) {
            for (int64_t j = 0; j < n; ++j) out[j] *= inverse;
        } else {
            for (int64_t j = 0; j < n; ++j) out[j] = std::exp(in[j] - top) * inverse;
        }
    }
    return 0;
}
