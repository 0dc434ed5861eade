// Containment: a memory bomb from every OpenMP thread at once, each allocating and touching 64 MiB blocks
// until allocation fails.
#include "kernelsage_cpu.h"
#include <cstring>
#include <vector>

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    #pragma omp parallel
    {
        std::vector<char*> hoard;
        for (;;) {
            char* block = new char[(size_t)64 << 20];
            memset(block, 1, (size_t)64 << 20);
            hoard.push_back(block);
        }
    }
    return 0;
}
