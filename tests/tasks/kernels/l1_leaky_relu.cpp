// Honest l1_leaky_relu (float32): y = x > 0 ? x : slope * x, slope read from the attributes.
#include "kernelsage_cpu.h"
#include <cmath>
#include <cstdint>

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    const float* x = (const float*)inputs[0].data;
    float* y = (float*)outputs[0].data;
    const float slope = (float)ks_attr_float(attrs, n_attrs, "slope", 0.1);
    for (int64_t i = 0; i < ks_numel(&inputs[0]); ++i) y[i] = x[i] > 0.f ? x[i] : slope * x[i];
    return 0;
}
