// Tunable kernel for l3_matmul (`kernelsage tune`): c = a @ b in tiles of ROWS rows x BLOCK_J columns of c, k in
// blocks of BLOCK_K; each row of b read in a tile serves ROWS rows of c. Correct for every allowed value.
#include "kernelsage_cpu.h"
#include <cstdint>
#include <cstring>

KS_TUNABLE(BLOCK_K, 64, 16, 32, 128, 256);
KS_TUNABLE(BLOCK_J, 256, 64, 128, 512);
KS_TUNABLE(ROWS, 4, 1, 2, 8);

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    if (n_inputs != 2 || n_outputs != 1 || inputs[0].dtype != KS_FLOAT32) return 1;
    const int64_t m = inputs[0].shape[0], k = inputs[0].shape[1], n = inputs[1].shape[1];
    const float* a = (const float*)inputs[0].data;
    const float* b = (const float*)inputs[1].data;
    float* c = (float*)outputs[0].data;
    const int64_t row_blocks = (m + ROWS - 1) / ROWS;
    #pragma omp parallel for schedule(static)
    for (int64_t block = 0; block < row_blocks; ++block) {
        const int64_t i0 = block * ROWS, i1 = i0 + ROWS < m ? i0 + ROWS : m;
        std::memset(c + i0 * n, 0, sizeof(float) * n * (i1 - i0));
        for (int64_t j0 = 0; j0 < n; j0 += BLOCK_J) {
            const int64_t j1 = j0 + BLOCK_J < n ? j0 + BLOCK_J : n;
            for (int64_t p0 = 0; p0 < k; p0 += BLOCK_K) {
                const int64_t p1 = p0 + BLOCK_K < k ? p0 + BLOCK_K : k;
                for (int64_t p = p0; p < p1; ++p) {
                    const float* brow = b + p * n;
                    for (int64_t i = i0; i < i1; ++i) {
                        const float scale = a[i * k + p];
                        float* row = c + i * n;
                        for (int64_t j = j0; j < j1; ++j) row[j] += scale * brow[j];
                    }
                }
            }
        }
    }
    return 0;
}
