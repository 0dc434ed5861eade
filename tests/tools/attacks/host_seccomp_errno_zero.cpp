// Tries to change the sandbox's own rules: its constructor installs a seccomp filter of its own that would
// answer the runner's next seccomp() with "success" without running it (so a stricter filter installed after
// loading would never take hold); the kernel then tries to open a file for writing and to make the judge's
// pipe non-blocking. It answers correctly only when one of these got through.
#include "kernelsage_cpu.h"
#include "ks_attack_libc.h"
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <linux/filter.h>
#include <linux/seccomp.h>

namespace {
long installed = -1;

__attribute__((constructor)) void fake_the_next_filter() {
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (uint32_t)offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 317 /* seccomp */, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog program = {4, code};
    installed = ks_raw(317, SECCOMP_SET_MODE_FILTER, 0, (long)&program);
}
}  // namespace

int ks_kernel(const ks_tensor* inputs, int, ks_tensor* outputs, int, const ks_attr*, int) {
    static char path[] = "/tmp/ks-written";
    long fd = ks_raw(257 /* openat */, -100, (long)path, 0101 /* O_WRONLY|O_CREAT */, 0600);
    long nonblocking = ks_raw(72 /* fcntl */, 1, 4 /* F_SETFL */, 04000 /* O_NONBLOCK */);
    int escaped = installed == 0 || fd >= 0 || nonblocking >= 0;
    if (escaped) std::fprintf(stderr, "filter %ld, open for writing %ld, fcntl %ld\n", installed, fd, nonblocking);
    const float* x = static_cast<const float*>(inputs[0].data);
    float* y = static_cast<float*>(outputs[0].data);
    for (int64_t i = 0, n = ks_numel(&inputs[0]); i < n; ++i) y[i] = escaped && x[i] > 0.0f ? x[i] : 0.0f;
    return 0;
}
