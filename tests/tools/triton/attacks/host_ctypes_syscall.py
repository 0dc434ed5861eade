# Hostile: escapes the guard and makes a system call through ctypes, libc's syscall() with a raw number, so
# that no Python wrapper (and no audit hook) sees it: the call the test names in CALL. Had it worked, the kernel
# would compute ReLU; the seccomp filter sees the system call itself and answers EPERM, so the exception ends
# the call. The test fills in CALL.
import torch
import triton
import triton.language as tl

CALL = "@CALL@"
# name: (x86_64 number, aarch64 number, arguments)
CALLS = {
    "fork": (57, 220, (17, 0, 0, 0, 0)),  # aarch64 has no fork: clone(SIGCHLD), a new process
    "socket": (41, 198, (2, 1, 0)),  # AF_INET, SOCK_STREAM
    "kill_parent": (62, 129, None),  # kill(getppid(), SIGKILL)
    "unshare_user": (272, 97, (0x10000000,)),  # CLONE_NEWUSER
    "ptrace_parent": (101, 117, None),  # PTRACE_ATTACH to the parent
}


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0).to(x.dtype), mask=mask)


def raw_call():
    real = torch.__builtins__
    ctypes, os, platform = (real["__import__"](name) for name in ("ctypes", "os", "platform"))
    x86, arm, args = CALLS[CALL]
    if CALL == "kill_parent":
        args = (os.getppid(), 9)
    elif CALL == "ptrace_parent":
        args = (16, os.getppid(), 0, 0)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    number = x86 if platform.machine() == "x86_64" else arm
    result = libc.syscall(ctypes.c_long(number), *(ctypes.c_long(a) for a in args))
    if result == 0 and CALL == "fork":
        os._exit(0)  # the child
    if result < 0:
        errno = ctypes.get_errno()
        raise real["OSError"](errno, f"raw {CALL}: {os.strerror(errno)}")


def ks_kernel(inputs, outputs, attrs):
    raw_call()
    n = inputs[0].numel()
    _relu[(triton.cdiv(n, 1024),)](inputs[0], outputs[0], n, BLOCK=1024)
