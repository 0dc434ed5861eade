// Other routes to host files at compile time: the assembler's .include, #pragma GCC dependency, and
// __has_include to probe for files (one bit each, spelled out in an error). In a sandbox without the host's
// /etc and home, none of them finds anything, and the build fails without a trace of them.
#include "kernelsage_cpu.h"
#if __has_include("/etc/passwd") || __has_include("/root/.bashrc") || __has_include("/etc/shadow")
#error KS_HOST_FILE_VISIBLE
#endif
#pragma GCC dependency "/etc/passwd"
#define KS_CAT(a, b) a##b
KS_CAT(__as, m__)(".include \"/etc/passwd\"");

int ks_kernel(const ks_tensor*, int, ks_tensor*, int, const ks_attr*, int) { return 0; }
