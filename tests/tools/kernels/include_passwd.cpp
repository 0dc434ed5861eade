// Tries to read a host file through the preprocessor: the error message would quote its first line.
#include "kernelsage_cpu.h"
#include "/etc/passwd"

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    return 0;
}
