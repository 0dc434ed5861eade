// As many threads as OpenMP will make (its only allowed way to threads), each spinning, then the work.
#include "kernelsage_cpu.h"
#include <omp.h>

int ks_kernel(const ks_tensor* inputs, int, ks_tensor* outputs, int, const ks_attr*, int) {
    omp_set_dynamic(0);
    omp_set_num_threads(20000);
    volatile long sink = 0;
#pragma omp parallel
    {
        for (long k = 0; k < 20000000; ++k) sink += k;
    }
    const float* x = static_cast<const float*>(inputs[0].data);
    float* y = static_cast<float*>(outputs[0].data);
    for (int64_t i = 0, n = ks_numel(&inputs[0]); i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
    return 0;
}
