// Mutant of the l3_matmul example: a block's end is compared with k - 1, so when k = 64j + 65 one block runs
// to k and the next repeats the last step.
#include "kernelsage_cpu.h"
#include <cstdint>
#include <cstring>

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    if (n_inputs != 2 || n_outputs != 1 || inputs[0].dtype != KS_FLOAT32) return 1;
    const int64_t m = inputs[0].shape[0], k = inputs[0].shape[1], n = inputs[1].shape[1];
    const float* a = (const float*)inputs[0].data;
    const float* b = (const float*)inputs[1].data;
    float* c = (float*)outputs[0].data;
    constexpr int64_t kBlock = 64;
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < m; ++i) {
        float* row = c + i * n;
        std::memset(row, 0, sizeof(float) * n);
        for (int64_t p0 = 0; p0 < k; p0 += kBlock) {
            const int64_t p1 = p0 + kBlock < k - 1 ? p0 + kBlock : k;
            for (int64_t p = p0; p < p1; ++p) {
                const float scale = a[i * k + p];
                const float* brow = b + p * n;
                for (int64_t j = 0; j < n; ++j) row[j] += scale * brow[j];
            }
        }
    }
    return 0;
}
