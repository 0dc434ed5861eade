// Allocates and touches memory until allocation fails.
#include "kernelsage_cpu.h"
#include <vector>

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    std::vector<std::vector<char>> hoard;
    for (;;) hoard.emplace_back((size_t)64 << 20, (char)1);
    return 0;
}
