// Containment: leaves a daemon behind. Double fork (through a function pointer), setsid, close descriptors,
// rename itself to KS_TAG (comm and argv[0], so the test can find it) and sleep for 1000 s; the call itself
// computes relu honestly and returns.
#include "kernelsage_cpu.h"
#include <cerrno>
#include <cstring>
#include <pthread.h>
#include <unistd.h>

#ifndef KS_TAG
#define KS_TAG "ksatk-daemon"
#endif

extern "C" int waitpid(int pid, int* status, int options);

static void rename_self() {
    pthread_setname_np(pthread_self(), KS_TAG);
    const size_t tag = strlen(KS_TAG);
    if (program_invocation_name && strlen(program_invocation_name) >= tag) {
        memcpy(program_invocation_name, KS_TAG, tag);
        program_invocation_name[tag] = '\0';
    }
}

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    auto spawn = &fork;
    int pid = spawn();
    if (pid == 0) {
        setsid();
        if (spawn() != 0) _exit(0);
        rename_self();
        for (int fd = 0; fd < 1024; ++fd) close(fd);
        for (int i = 0; i < 1000; ++i) sleep(1);
        _exit(0);
    }
    if (pid > 0) { int status; waitpid(pid, &status, 0); }
    const float* x = (const float*)inputs[0].data;
    float* y = (float*)outputs[0].data;
    for (int64_t i = 0; i < ks_numel(&inputs[0]); ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
    return 0;
}
