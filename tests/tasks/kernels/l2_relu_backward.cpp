// Honest l2_relu_backward (float32): grad_x = x > 0 ? grad_y : 0.
#include "kernelsage_cpu.h"
#include <cmath>
#include <cstdint>

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    const float* grad = (const float*)inputs[0].data;
    const float* x = (const float*)inputs[1].data;
    float* out = (float*)outputs[0].data;
    for (int64_t i = 0; i < ks_numel(&inputs[0]); ++i) out[i] = x[i] > 0.f ? grad[i] : 0.f;
    return 0;
}
