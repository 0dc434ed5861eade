// relu32 with two tunables, correct for every allowed value: elements in chunks of CHUNK per OpenMP iteration,
// UNROLL elements per inner step.
#include "kernelsage_cpu.h"
#include <cstdint>

KS_TUNABLE(CHUNK, 256, 64, 1024, 4096);
KS_TUNABLE(UNROLL, 1, 2, 4);

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    const float* x = (const float*)inputs[0].data;
    float* y = (float*)outputs[0].data;
    const int64_t n = ks_numel(&inputs[0]);
    #pragma omp parallel for schedule(static)
    for (int64_t start = 0; start < n; start += CHUNK) {
        const int64_t end = start + CHUNK < n ? start + CHUNK : n;
        int64_t i = start;
        for (; i + UNROLL <= end; i += UNROLL)
            for (int u = 0; u < UNROLL; ++u) y[i + u] = x[i + u] > 0.0f ? x[i + u] : 0.0f;
        for (; i < end; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
    }
    return 0;
}
