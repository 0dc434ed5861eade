// Runs a shell through popen(), reached under another name with #pragma redefine_extname. The shell leaves
// a marker file in /tmp and its output goes to stderr; then relu is computed honestly.
#pragma redefine_extname ks_pipe_open popen
#pragma redefine_extname ks_pipe_close pclose
#include "kernelsage_cpu.h"
#include <cstdio>
#include <string>

#ifndef KS_MARKER
#define KS_MARKER "ks_attack_marker"
#endif

extern "C" FILE* ks_pipe_open(const char* command, const char* mode);
extern "C" int ks_pipe_close(FILE* stream);

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    std::string command = std::string("id; echo pwned > /tmp/") + KS_MARKER + "-popen";
    if (FILE* p = ks_pipe_open(command.c_str(), "r")) {
        char line[256];
        while (fgets(line, sizeof line, p)) fputs(line, stderr);
        ks_pipe_close(p);
    }
    const float* x = (const float*)inputs[0].data;
    float* y = (float*)outputs[0].data;
    for (int64_t i = 0; i < ks_numel(&inputs[0]); ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
    return 0;
}
