// Mutant of the l3_topk example: equal values ranked by value alone (partial_sort leaves their order open).
#include "kernelsage_cpu.h"
#include <algorithm>
#include <cstdint>
#include <vector>

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    if (n_inputs != 1 || n_outputs != 2 || inputs[0].dtype != KS_FLOAT32) return 1;
    const int64_t n = inputs[0].shape[inputs[0].ndim - 1];
    const int64_t rows = ks_numel(&inputs[0]) / n;
    const int64_t k = ks_attr_int(attrs, n_attrs, "k", 1);
    if (k < 1 || k > n) return 2;
    const float* x = (const float*)inputs[0].data;
    float* values = (float*)outputs[0].data;
    int64_t* indices = (int64_t*)outputs[1].data;
    #pragma omp parallel
    {
        std::vector<int64_t> order(n);
        #pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; ++r) {
            const float* row = x + r * n;
            for (int64_t j = 0; j < n; ++j) order[j] = j;
            // Larger value first; on equal values the lower index first.
            std::partial_sort(order.begin(), order.begin() + k, order.end(), [row](int64_t p, int64_t q) {
                return row[p] > row[q];
            });
            for (int64_t j = 0; j < k; ++j) {
                values[r * k + j] = row[order[j]];
                indices[r * k + j] = order[j];
            }
        }
    }
    return 0;
}
