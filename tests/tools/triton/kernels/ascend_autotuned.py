# Autotuned (two configurations) with a grid that reads the chosen BLOCK: on npu-frontend every configuration
# is compiled (nothing can be timed to choose one).
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 256}), triton.Config({"BLOCK": 1024})], key=["n"])
@triton.jit
def _kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


def ks_kernel(inputs, outputs, attrs):
    n = outputs[0].numel()
    _kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](inputs[0], outputs[0], n)
