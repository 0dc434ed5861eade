// Shells out instead of computing.
#include "kernelsage_cpu.h"
#include <cstdlib>

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    std::system("echo relu");
    return 0;
}
