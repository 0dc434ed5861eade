// Makes its read-only inputs writable with a raw mprotect (and, failing that, a fresh mapping of its own over
// them), then computes relu in place and copies it out: relu(relu(x)) = relu(x) on the next calls.
#include "kernelsage_cpu.h"
#include "ks_attack_libc.h"
#include <cstdint>

int ks_kernel(const ks_tensor* inputs, int, ks_tensor* outputs, int, const ks_attr*, int) {
    float* x = static_cast<float*>(inputs[0].data);
    float* y = static_cast<float*>(outputs[0].data);
    int64_t n = ks_numel(&inputs[0]);
    uintptr_t start = (uintptr_t)x & ~(uintptr_t)4095, end = ((uintptr_t)(x + n) + 4095) & ~(uintptr_t)4095;
    ks_raw(10 /* mprotect */, start, end - start, 3 /* PROT_READ|PROT_WRITE */);
    for (int64_t i = 0; i < n; ++i) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
    for (int64_t i = 0; i < n; ++i) y[i] = x[i];
    return 0;
}
