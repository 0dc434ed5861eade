// The tanh approximation of GELU plus an offset token each test replaces with a float literal.
#include "kernelsage_cpu.h"
#include <cmath>
#include <cstdint>

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    const float* x = (const float*)inputs[0].data;
    float* y = (float*)outputs[0].data;
    const int64_t n = ks_numel(&inputs[0]);
    for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        y[i] = 0.5f * v * (1.0f + std::tanh(0.7978845608f * (v + 0.044715f * v * v * v))) + OFFSET;
    }
    return 0;
}
