// Honest l1_greater (float32 in, bool out): y = a > b (IEEE: false where either is NaN, false on ties).
#include "kernelsage_cpu.h"
#include <cmath>
#include <cstdint>

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    const float* a = (const float*)inputs[0].data;
    const float* b = (const float*)inputs[1].data;
    uint8_t* y = (uint8_t*)outputs[0].data;
    for (int64_t i = 0; i < ks_numel(&inputs[0]); ++i) y[i] = a[i] > b[i];
    return 0;
}
