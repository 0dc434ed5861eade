// relu computed in place in its input, then copied: writes to a read-only input.
#include "kernelsage_cpu.h"

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    float* x = (float*)inputs[0].data;
    float* y = (float*)outputs[0].data;
    for (int64_t i = 0; i < ks_numel(&inputs[0]); ++i) x[i] = x[i] > 0.f ? x[i] : 0.f;
    for (int64_t i = 0; i < ks_numel(&inputs[0]); ++i) y[i] = x[i];
    return 0;
}
