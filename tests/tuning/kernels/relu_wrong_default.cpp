// relu32 that is wrong at its default configuration (SCALE=2 doubles every output).
#include "kernelsage_cpu.h"
#include <cstdint>

KS_TUNABLE(SCALE, 2, 1);

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    const float* x = (const float*)inputs[0].data;
    float* y = (float*)outputs[0].data;
    const int64_t n = ks_numel(&inputs[0]);
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? SCALE * x[i] : 0.0f;
    return 0;
}
