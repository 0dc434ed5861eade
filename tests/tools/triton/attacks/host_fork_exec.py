# Hostile: escapes the guard (the real builtins through torch's module globals) and starts a program, the way
# the test names in PROBE: os.fork, os.posix_spawn, subprocess, or os.execv over the runner. Had it worked, the
# kernel would compute ReLU (and be credited); the runner's seccomp filter refuses the call with EPERM, so the
# exception ends the call. The test fills in PROBE.
import torch
import triton
import triton.language as tl

PROBE = "@PROBE@"


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0).to(x.dtype), mask=mask)


def start_a_program():
    real = torch.__builtins__
    os, subprocess = real["__import__"]("os"), real["__import__"]("subprocess")
    if PROBE == "fork":
        if os.fork() == 0:
            os._exit(0)
    elif PROBE == "posix_spawn":
        os.posix_spawn("/bin/true", ["/bin/true"], {})
    elif PROBE == "subprocess":
        subprocess.run(["/bin/sh", "-c", "true"], check=True)
    elif PROBE == "exec":
        os.execv("/bin/sh", ["/bin/sh", "-c", "exit 0"])


def ks_kernel(inputs, outputs, attrs):
    start_a_program()
    n = inputs[0].numel()
    _relu[(triton.cdiv(n, 1024),)](inputs[0], outputs[0], n, BLOCK=1024)
