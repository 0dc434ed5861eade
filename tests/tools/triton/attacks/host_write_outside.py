# Hostile: escapes the guard and writes a file where the host would find it: the path the test names in TARGET
# (a folder of the host's), then next to torch's own modules. Had a write worked, the kernel would compute ReLU;
# the sandbox's file system holds no host folder and binds the packages read-only, so the OSError ends the
# call. The test fills in TARGET.
import torch
import triton
import triton.language as tl

TARGET = "@TARGET@"


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0).to(x.dtype), mask=mask)


def ks_kernel(inputs, outputs, attrs):
    real = torch.__builtins__
    os = real["__import__"]("os")
    written = 0
    for path in (TARGET, os.path.join(os.path.dirname(torch.__file__), "planted.py")):
        try:
            with real["open"](path, "w") as handle:
                handle.write("x = 1\n")
            written += 1
        except real["OSError"] as error:
            last = error
    if not written:
        raise last
    n = inputs[0].numel()
    _relu[(triton.cdiv(n, 1024),)](inputs[0], outputs[0], n, BLOCK=1024)
