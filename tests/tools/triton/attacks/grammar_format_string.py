# Hostile: str.format walks attributes named inside its string, where no rule on the AST's attributes looks:
# "{0.__globals__[__builtins__]}" reads a triton function's globals (the real builtins) as text, and the
# exception carries the text out through the verdict's message.
import triton
import triton.language as tl


@triton.jit
def _unused(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 0.0, mask=offs < n)


def ks_kernel(inputs, outputs, attrs):
    leaked = "{0.__globals__[__builtins__]}".format(tl.load)  # noqa: UP030, UP032
    raise RuntimeError(leaked[:2000])
