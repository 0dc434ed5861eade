// Writes far outside its output buffer.
#include "kernelsage_cpu.h"

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    volatile float* y = (volatile float*)outputs[0].data;
    const int64_t far = (int64_t)1 << 40;
    y[far + ks_numel(&inputs[0])] = 1.0f;
    return 0;
}
