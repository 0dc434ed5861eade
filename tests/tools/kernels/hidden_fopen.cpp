// Opens a file through a name the source scan cannot see (token pasting); relu otherwise.
#include "kernelsage_cpu.h"
#include <cstdio>

#define JOIN(a, b) a##b

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    FILE* f = JOIN(fop, en)("/etc/hostname", "r");
    const float* x = (const float*)inputs[0].data;
    float* y = (float*)outputs[0].data;
    for (int64_t i = 0; i < ks_numel(&inputs[0]); ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
    if (f) y[0] = 12345.f;
    return 0;
}
