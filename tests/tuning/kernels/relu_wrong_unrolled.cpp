// relu32 whose UNROLL=4 drops each chunk's tail (a bug only that value has): the tuner must verify it, find it
// wrong, and never time it.
#include "kernelsage_cpu.h"
#include <cstdint>

KS_TUNABLE(UNROLL, 1, 2, 4);

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    const float* x = (const float*)inputs[0].data;
    float* y = (float*)outputs[0].data;
    const int64_t n = ks_numel(&inputs[0]);
    int64_t i = 0;
    for (; i + UNROLL <= n; i += UNROLL)
        for (int u = 0; u < UNROLL; ++u) y[i + u] = x[i + u] > 0.0f ? x[i + u] : 0.0f;
    if (UNROLL != 4)
        for (; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
    return 0;
}
