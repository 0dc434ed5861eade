#include "kernelsage_cpu.h"

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    float* y = (float*)outputs[0].data;
    y[0] = undeclared_value;
    return 0;
}
