"""Real-toolchain mode of the stand-in bisheng (tests only), on when a file REAL_LINK lies beside it.

A compile runs the real C preprocessor (g++ -E) over kernel.cpp with the -I flags it was given, so a missing
include directory fails as it would, then compiles a host stub like the one bisheng generates for a
`<<<...>>>` launch (it calls the runtime's launch and the Ascend C runtime's registration) into a real object.
A link runs the real g++ with the CANN -L/-l/-Wl flags on the real objects; torch's libraries and the
text-only glue object of the stand-in g++ are left out (they are not at hand here).
"""

import os
import subprocess
import sys

HOST_STUB = r"""
extern int rtKernelLaunchWithHandleV2(void* handle, unsigned block_dim);
extern int AscendcRegisterKernel(const char* name);
int ks_launch(const void* inputs, int n_inputs, void* outputs, int n_outputs, const void* attrs, int n_attrs,
              const void* npu) {
    static int registered;
    if (!registered) registered = AscendcRegisterKernel("kernel") == 0;
    return rtKernelLaunchWithHandleV2(0, 8);
}
"""
# The machine's own compilers, by path: the stand-in g++ may come first on PATH.
GXX, GCC = "/usr/bin/g++", "/usr/bin/gcc"
NOT_AT_HAND = ("-ltorch", "-lc10", "-lpython", "-ltorch_npu", "-ltorch_cpu", "-ltorch_python")


def enabled(here):
    return os.path.exists(os.path.join(here, "REAL_LINK"))


def compile_kernel(argv, source, output):
    includes = [a for a in argv if a.startswith("-I")]
    pre = subprocess.run([GXX, "-E", "-x", "c++", "-std=c++17", *includes, source, "-o", os.devnull],
                         capture_output=True, text=True)
    if pre.returncode != 0:
        sys.stderr.write(pre.stderr)
        sys.exit(1)
    with open("standin_host_stub.c", "w") as stub:
        stub.write(HOST_STUB)
    done = subprocess.run([GCC, "-fPIC", "-c", "standin_host_stub.c", "-o", output], capture_output=True, text=True)
    sys.stderr.write(done.stderr)
    sys.exit(done.returncode)


def is_elf(path):
    with open(path, "rb") as handle:
        return handle.read(4) == b"\x7fELF"


def link(argv):
    kept = []
    for arg in argv:
        if arg.endswith(".o") and not is_elf(arg):
            continue
        if arg.startswith(NOT_AT_HAND) or (arg.startswith("-L") and not os.path.isdir(arg[2:])):
            continue
        if arg.startswith("-Wl,-rpath,") and not os.path.isdir(arg[len("-Wl,-rpath,"):]):
            continue
        kept.append(arg)
    done = subprocess.run([GXX, *kept], capture_output=True, text=True)
    sys.stderr.write(done.stdout + done.stderr)
    sys.exit(done.returncode)
