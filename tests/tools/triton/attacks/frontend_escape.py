# Hostile, for the npu-frontend device: at import (before any launch) it escapes the guard (the real builtins
# through torch's module globals) and probes what the sandbox should hide: a host file, a secret from the
# environment, a TCP connection to the test's port, a socket at all, and a shell. If any probe worked it
# raises, naming what it found (a compile error); contained, it launches an honest ReLU (compiles: OK).
# The test fills in SECRET_FILE, SECRET_VALUE and PORT.
import torch
import triton
import triton.language as tl

SECRET_FILE = "@SECRET_FILE@"
SECRET_VALUE = "@SECRET_VALUE@"
PORT = int("@PORT@")


def probe():
    real = torch.__builtins__
    os, socket, subprocess = real["__import__"]("os"), real["__import__"]("socket"), real["__import__"]("subprocess")
    found = []
    for path in (SECRET_FILE, "/etc/passwd", "/work/main/src", "/root"):
        try:
            with real["open"](path, "rb") as handle:
                handle.read(1)
            found.append(f"read {path}")
        except real["OSError"]:
            pass
    if any(SECRET_VALUE in value for value in os.environ.values()):
        found.append("environment")
    try:
        socket.socket().close()
        found.append("a socket")
    except real["OSError"]:
        pass
    try:
        socket.create_connection(("127.0.0.1", PORT), timeout=1).close()
        found.append("network")
    except real["OSError"]:
        pass
    try:  # npu's seccomp policy lets programs start (triton-adapter-opt): the mount namespace hides the files
        shown = subprocess.run(["/bin/sh", "-c", f"cat {SECRET_FILE} /etc/hostname /work/main/.git/HEAD"],
                               capture_output=True, text=True)
        if shown.stdout.strip():
            found.append("files through a shell: " + shown.stdout.strip()[:80])
    except real["OSError"]:
        pass
    return found


FOUND = probe()


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0).to(x.dtype), mask=mask)


def ks_kernel(inputs, outputs, attrs):
    if FOUND:
        raise RuntimeError(f"kernelsage-attack found: {FOUND}")
    n = inputs[0].numel()
    _relu[(triton.cdiv(n, 1024),)](inputs[0], outputs[0], n, BLOCK=1024)
