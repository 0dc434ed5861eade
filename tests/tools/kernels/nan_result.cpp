// relu that produces NaN instead of zero for negative inputs.
#include "kernelsage_cpu.h"
#include <limits>

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    const float* x = (const float*)inputs[0].data;
    float* y = (float*)outputs[0].data;
    for (int64_t i = 0; i < ks_numel(&inputs[0]); ++i)
        y[i] = x[i] > 0.f ? x[i] : std::numeric_limits<float>::quiet_NaN();
    return 0;
}
