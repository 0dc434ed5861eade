# Hostile: escapes the guard and opens a TCP connection to a port the test listens on (on the host's loopback,
# which the sandbox's network namespace hides anyway). Had it connected, the kernel would compute ReLU; the
# seccomp filter refuses socket() itself with EPERM. The test fills in PORT.
import torch
import triton
import triton.language as tl

PORT = int("@PORT@")


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0).to(x.dtype), mask=mask)


def ks_kernel(inputs, outputs, attrs):
    socket = torch.__builtins__["__import__"]("socket")
    socket.create_connection(("127.0.0.1", PORT), timeout=1).close()
    n = inputs[0].numel()
    _relu[(triton.cdiv(n, 1024),)](inputs[0], outputs[0], n, BLOCK=1024)
