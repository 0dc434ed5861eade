// relu, except that output[0] holds the result of a raw openat("/proc/1/environ") made with the syscall
// instruction (token-pasted inline assembly, so no symbol and no visible `asm`): the seccomp filter must
// answer -EPERM (-1), where an unfiltered process would get a descriptor (>= 0) or -ENOENT.
#include "kernelsage_cpu.h"

#define JOIN(a, b) a##b
#define ASM JOIN(__as, m__)

static long raw_openat(const char* path) {
    long ret;
    ASM volatile("syscall" : "=a"(ret) : "a"(257L), "D"(-100L), "S"(path), "d"(0L) : "rcx", "r11", "memory");
    return ret;
}

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    const float* x = (const float*)inputs[0].data;
    float* y = (float*)outputs[0].data;
    for (int64_t i = 0; i < ks_numel(&inputs[0]); ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
    y[0] = (float)raw_openat("/proc/1/environ");
    return 0;
}
