// Tries every way out it knows with raw system calls (no symbol for the link check), from an IFUNC resolver
// (which runs while the library is relocated), from a constructor and from the kernel: new processes, io_uring,
// userfaultfd, ptrace, namespaces, personality, prctl, timers and alarms, resource limits, perf counters,
// keyrings, pidfds, other processes' memory, files opened for writing, seccomp filters of its own. It answers correctly only when one of them
// succeeded: a judged-correct run means the sandbox let something through (stderr names it).
#include "kernelsage_cpu.h"
#include "ks_attack_libc.h"
#include <cstdint>
#include <cstdio>

namespace {
int escaped;
const char* escapes[64];  // what got through, printed from the kernel (a resolver may not call libc yet)
int n_escapes;
const char* places[64];

struct Attempt { const char* name; long nr, a, b, c, d, e; };

void sweep(const char* where) {
    static char written_path[] = "/tmp/ks-sweep";
    static char name[] = "ks";
    static long params[16];
    static long limit[2] = {64, 64};
    static long perf_attr[16] = {1 /* PERF_TYPE_SOFTWARE */ | (128L << 32) /* size */, 1 /* TASK_CLOCK */};
    static long itimer[4] = {0, 0, 1, 0};
    long self = ks_raw(39 /* getpid */);
    const Attempt attempts[] = {
        {"fork", 57, 0, 0, 0, 0, 0},
        {"vfork-like clone", 56, 17 /* SIGCHLD */, 0, 0, 0, 0},
        {"io_uring_setup", 425, 8, (long)params, 0, 0, 0},
        {"userfaultfd", 323, 0, 0, 0, 0, 0},
        {"ptrace(TRACEME)", 101, 0, 0, 0, 0, 0},
        {"unshare(NEWUSER)", 272, 0x10000000L, 0, 0, 0, 0},
        {"unshare(NEWNS)", 272, 0x00020000L, 0, 0, 0, 0},
        {"personality(ADDR_NO_RANDOMIZE)", 135, 0x0040000, 0, 0, 0, 0},
        {"prctl(PR_SET_NAME)", 157, 15, (long)name, 0, 0, 0},
        {"memfd_create", 319, (long)name, 0, 0, 0, 0},
        {"socket(AF_UNIX)", 41, 1, 1, 0, 0, 0},
        {"socketpair", 53, 1, 1, 0, (long)params, 0},
        {"kill(self, 0)", 62, self, 0, 0, 0, 0},
        {"alarm", 37, 0, 0, 0, 0, 0},
        {"setitimer", 38, 0, (long)itimer, 0, 0, 0},
        {"prlimit64(NOFILE)", 302, 0, 7, (long)limit, 0, 0},
        {"perf_event_open", 298, (long)perf_attr, 0, -1, -1, 0},
        {"keyctl(GET_KEYRING_ID)", 250, 0, -3, 0, 0, 0},
        {"pidfd_open(self)", 434, self, 0, 0, 0, 0},
        {"process_vm_readv(self)", 310, self, (long)params, 1, (long)params, 1},
        {"pipe2", 293, (long)params, 0, 0, 0, 0},
        {"getppid", 110, 0, 0, 0, 0, 0},
        {"openat for writing", 257, -100, (long)written_path, 0101 /* O_WRONLY|O_CREAT */, 0600, 0},
        {"fcntl(F_SETFL, O_NONBLOCK)", 72, 1, 4, 04000, 0, 0},
        {"seccomp(SET_MODE_STRICT)", 317, 0, 0, 0, 0, 0},
    };
    for (const Attempt& t : attempts) {
        long ret = ks_raw(t.nr, t.a, t.b, t.c, t.d, t.e);
        if (ret == 0 && (t.nr == 57 || t.nr == 56)) ks_raw(231 /* exit_group */, 0);  // a child: leave at once
        if (ret >= 0 && n_escapes < 64) {
            places[n_escapes] = where;
            escapes[n_escapes++] = t.name;
            escaped = 1;
        }
    }
}

extern "C" void ks_resolved_impl() {}
// Runs while the library is being relocated: no tables (they may not be relocated yet), plain calls only.
extern "C" void* ks_resolver() {
    long child = ks_raw(57 /* fork */);
    if (child == 0) ks_raw(231 /* exit_group */, 0);
    if (child > 0 || ks_raw(41 /* socket */, 1, 1, 0) >= 0 || ks_raw(425 /* io_uring_setup */, 0, 0) != -1) {
        escaped = 1;  // io_uring_setup(0, NULL) answers EPERM when denied, EFAULT/EINVAL when reachable
    }
    return (void*)&ks_resolved_impl;
}
extern "C" void ks_resolved() __attribute__((ifunc("ks_resolver")));

__attribute__((constructor)) void at_load() { sweep("constructor"); }
}  // namespace

int ks_kernel(const ks_tensor* inputs, int, ks_tensor* outputs, int, const ks_attr*, int) {
    static int swept;
    if (!swept++) {
        sweep("kernel");
        for (int k = 0; k < n_escapes; ++k) std::fprintf(stderr, "%s: %s succeeded\n", places[k], escapes[k]);
    }
    ks_resolved();
    const float* x = static_cast<const float*>(inputs[0].data);
    float* y = static_cast<float*>(outputs[0].data);
    for (int64_t i = 0, n = ks_numel(&inputs[0]); i < n; ++i) y[i] = escaped && x[i] > 0.0f ? x[i] : 0.0f;
    return 0;
}
