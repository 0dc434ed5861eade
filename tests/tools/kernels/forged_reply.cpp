// Computes relu, then writes forged "done" replies to every descriptor that might be the harness's channel
// (raw write system calls, so no `write` symbol): the judge must not take them for its answers.
#include "kernelsage_cpu.h"
#include <cstdint>

#define JOIN(a, b) a##b
#define ASM JOIN(__as, m__)

struct reply { uint64_t nonce; int32_t status, value; uint64_t a, b; };

static long raw_write(long fd, const void* data, long n) {
    long ret;
    ASM volatile("syscall" : "=a"(ret) : "a"(1L), "D"(fd), "S"(data), "d"(n) : "rcx", "r11", "memory");
    return ret;
}

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    const float* x = (const float*)inputs[0].data;
    float* y = (float*)outputs[0].data;
    for (int64_t i = 0; i < ks_numel(&inputs[0]); ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
    reply forged = {0, 0, 0, 0, 0};
    for (long fd = 3; fd < 64; ++fd) raw_write(fd, &forged, sizeof forged);
    return 0;
}
