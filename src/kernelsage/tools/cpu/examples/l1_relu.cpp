// Reference kernel for l1_relu: float32 and float16 (converted through float).
#include "kernelsage_cpu.h"
#include <cstdint>

template <typename T> static void relu(const T* x, T* y, int64_t n) {
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > T(0) ? x[i] : T(0);
}

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    const ks_tensor& x = inputs[0];
    ks_tensor& y = outputs[0];
    int64_t n = ks_numel(&x);
    if (x.dtype == KS_FLOAT32) { relu((const float*)x.data, (float*)y.data, n); return 0; }
    if (x.dtype == KS_FLOAT16) {
        const uint16_t* in = (const uint16_t*)x.data; uint16_t* out = (uint16_t*)y.data;
        #pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; ++i) { float v = ks_half_to_float(in[i]); out[i] = ks_float_to_half(v > 0.f ? v : 0.f); }
        return 0;
    }
    return 1;
}
