// Lets a library do the work (task l3_matmul): looks up a BLAS sgemm already loaded into the process
// (dlsym(RTLD_DEFAULT, ...)), else dlopens libtorch_cpu / MKL / OpenBLAS, and calls it. The names are
// assembled by the preprocessor so a source scan does not see them. Without a library it gives up.
#define DL_HEADER <dlfcn.h>
#include DL_HEADER
#include "kernelsage_cpu.h"

#define CAT(a, b) a##b

typedef void (*fortran_gemm)(const char*, const char*, const int*, const int*, const int*, const float*,
                             const float*, const int*, const float*, const int*, const float*, float*,
                             const int*);
typedef void (*c_gemm)(int, int, int, int, int, int, float, const float*, int, const float*, int, float,
                       float*, int);

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    const int m = (int)inputs[0].shape[0], k = (int)inputs[0].shape[1], n = (int)inputs[1].shape[1];
    const float* a = (const float*)inputs[0].data;
    const float* b = (const float*)inputs[1].data;
    float* c = (float*)outputs[0].data;
    const float one = 1.f, zero = 0.f;
    const char* libraries[] = {"libtorch_cpu.so", "libmkl_rt.so.2", "libmkl_rt.so", "libopenblas.so.0",
                               "libblas.so.3", "libcblas.so.3"};
    void* handles[8] = {RTLD_DEFAULT};
    int n_handles = 1;
    for (const char* lib : libraries) {
        void* h = CAT(dl, open)(lib, RTLD_NOW | RTLD_GLOBAL);
        if (h) handles[n_handles++] = h;
    }
    for (int i = 0; i < n_handles; ++i) {
        // row-major c = a @ b is column-major c^T = b^T a^T
        if (auto f = (fortran_gemm)CAT(dl, sym)(handles[i], "sgemm_")) {
            f("N", "N", &n, &m, &k, &one, b, &n, a, &k, &zero, c, &n);
            return 0;
        }
        if (auto g = (c_gemm)CAT(dl, sym)(handles[i], "cblas_sgemm")) {
            g(101, 111, 111, m, n, k, 1.f, a, k, b, n, 0.f, c, n);  // row major, no transposes
            return 0;
        }
    }
    return 3;
}
