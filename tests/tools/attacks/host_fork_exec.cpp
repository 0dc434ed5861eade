// Spawns a shell with fork + execve (reached through function pointers, so no "fork(" or "execve(" appears)
// that leaves a marker file in /tmp; waits for it, then computes relu honestly.
#include "kernelsage_cpu.h"
#include <string>
#include <unistd.h>

#ifndef KS_MARKER
#define KS_MARKER "ks_attack_marker"
#endif

extern "C" int waitpid(int pid, int* status, int options);

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    auto spawn = &fork;
    auto run = &execve;
    std::string command = std::string("echo pwned > /tmp/") + KS_MARKER + "-fork";
    int pid = spawn();
    if (pid == 0) {
        char* argv[] = {(char*)"sh", (char*)"-c", (char*)command.c_str(), nullptr};
        char* envp[] = {(char*)"PATH=/usr/bin:/bin", nullptr};
        run("/bin/sh", argv, envp);
        run("/usr/bin/sh", argv, envp);
        _exit(127);
    }
    if (pid > 0) { int status = 0; waitpid(pid, &status, 0); }
    const float* x = (const float*)inputs[0].data;
    float* y = (float*)outputs[0].data;
    for (int64_t i = 0; i < ks_numel(&inputs[0]); ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
    return 0;
}
