// Loads a library outside the C/C++/OpenMP runtime from its constructor (open is allowed while the loader
// works), with dlopen found in libc's own tables, so no forbidden symbol shows in the link check. It answers
// correctly only when some such library could be loaded: a judged-correct run means it got one (a BLAS, had
// one been installed, would do a matmul's work the same way).
#include "kernelsage_cpu.h"
#include "ks_attack_libc.h"
#include <cstdio>

namespace {
typedef void* (*dlopen_fn)(const char*, int);
int loaded;

__attribute__((constructor)) void load_a_library() {
    dlopen_fn open_library = reinterpret_cast<dlopen_fn>(ks_libc("dlopen"));
    const char* names[] = {"libopenblas.so.0", "libblas.so.3", "libmkl_rt.so", "libgmp.so.10", "libz.so.1",
                           "libcrypto.so.3", "libsqlite3.so.0", "libpython3.11.so.1.0"};
    for (const char* name : names)
        if (open_library && open_library(name, 2 /* RTLD_NOW */)) {
            std::fprintf(stderr, "loaded %s\n", name);
            loaded = 1;
            return;
        }
}
}  // namespace

int ks_kernel(const ks_tensor* inputs, int, ks_tensor* outputs, int, const ks_attr*, int) {
    const float* x = static_cast<const float*>(inputs[0].data);
    float* y = static_cast<float*>(outputs[0].data);
    for (int64_t i = 0, n = ks_numel(&inputs[0]); i < n; ++i) y[i] = loaded && x[i] > 0.0f ? x[i] : 0.0f;
    return 0;
}
