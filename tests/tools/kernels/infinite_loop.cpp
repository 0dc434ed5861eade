// Never returns.
#include "kernelsage_cpu.h"

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    volatile int spinning = 1;
    while (spinning) {
    }
    return 0;
}
