// Honest on small inputs; on large ones (the performance case) it gets one element wrong on one call, well past
// the first ones: a kernel that skips work where it expects no check would look the same. A check at sampled
// positions passes it almost always (about 2,000-9,000 of 262,144 positions per call); only a full check of every
// call's output sees it.
#include "kernelsage_cpu.h"

static int large_calls = 0;

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    const float* x = (const float*)inputs[0].data;
    float* y = (float*)outputs[0].data;
    const int64_t n = ks_numel(&inputs[0]);
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
    if (n >= 100000 && ++large_calls == 12) y[n / 3] = 1000.f + x[n / 3];
    return 0;
}
