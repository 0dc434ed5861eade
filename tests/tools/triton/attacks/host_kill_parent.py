# Hostile: escapes the guard and sends SIGKILL to its parent (the sandbox's pid 1, whose death takes the
# sandbox down), then to pid 1 by number. Had either worked, the judge would see a dead runner; the seccomp filter
# refuses kill() with EPERM, so the exception ends the call and the judge serves the next job as before.
import torch
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0).to(x.dtype), mask=mask)


def ks_kernel(inputs, outputs, attrs):
    os = torch.__builtins__["__import__"]("os")
    for pid in (os.getppid(), 1):
        os.kill(pid, 9)
    n = inputs[0].numel()
    _relu[(triton.cdiv(n, 1024),)](inputs[0], outputs[0], n, BLOCK=1024)
