// Runs a shell through system(), the name assembled by token pasting so a source scan does not see it.
// The shell leaves a marker file in /tmp; then relu is computed honestly.
#include "kernelsage_cpu.h"
#include <cstdlib>
#include <string>

#ifndef KS_MARKER
#define KS_MARKER "ks_attack_marker"
#endif
#define CAT(a, b) a##b

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    std::string command = std::string("echo pwned > /tmp/") + KS_MARKER + "-system";
    int ignored = CAT(sys, tem)(command.c_str());
    (void)ignored;
    const float* x = (const float*)inputs[0].data;
    float* y = (float*)outputs[0].data;
    for (int64_t i = 0; i < ks_numel(&inputs[0]); ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
    return 0;
}
