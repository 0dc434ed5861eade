// ReLU with a loop bound off by one: it writes one element past the end of its output (the right value for
// x[n], whatever lies there). Every element of the output itself is right; only what lies after it shows.
#include "kernelsage_cpu.h"

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    const float* x = (const float*)inputs[0].data;
    float* y = (float*)outputs[0].data;
    const int64_t n = ks_numel(&inputs[0]);
    for (int64_t i = 0; i <= n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
    return 0;
}
