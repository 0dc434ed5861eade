// Modifies its inputs: a wrong kernel (|x| instead of relu(x)) that also replaces x by |x| in place, so a
// reference computed from the inputs after the call, relu(|x|) = |x|, agrees with it.
#include "kernelsage_cpu.h"

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    float* x = (float*)inputs[0].data;
    float* y = (float*)outputs[0].data;
    const int64_t n = ks_numel(&inputs[0]);
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        const float v = x[i] < 0.f ? -x[i] : x[i];
        x[i] = v;
        y[i] = v;
    }
    return 0;
}
