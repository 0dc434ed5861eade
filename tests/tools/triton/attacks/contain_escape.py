# Hostile: escapes the guard (the real builtins through torch's module globals), then looks for everything the
# sandbox should hide. It computes ReLU correctly only if every probe failed, so "correct" means "contained".
# The test fills in SECRET_FILE, SECRET_VALUE and PORT.
import torch
import triton
import triton.language as tl

SECRET_FILE = "@SECRET_FILE@"
SECRET_VALUE = "@SECRET_VALUE@"
PORT = int("@PORT@")


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0).to(x.dtype), mask=mask)


def leaks():
    real = torch.__builtins__  # the real builtins: import, open and the rest
    os, socket, subprocess = real["__import__"]("os"), real["__import__"]("socket"), real["__import__"]("subprocess")
    found = []
    if os.path.exists(SECRET_FILE) or os.path.exists("/etc/passwd") or os.path.exists("/work/main/src"):
        found.append("host files")
    if any(SECRET_VALUE in value for value in os.environ.values()):
        found.append("environment")
    try:
        socket.create_connection(("127.0.0.1", PORT), timeout=1).close()
        found.append("network")
    except real["OSError"]:
        pass
    if len([p for p in os.listdir("/proc") if p.isdigit()]) > 6:
        found.append("host processes")
    try:
        with real["open"](os.path.dirname(torch.__file__) + "/planted.py", "w") as handle:
            handle.write("x = 1\n")
        found.append("writable packages")
    except real["OSError"]:
        pass
    try:  # the seccomp filter refuses the fork (tests/tools/triton/attacks/host_*.py test it alone)
        shown = subprocess.run(["/bin/sh", "-c", f"cat {SECRET_FILE} /work/main/.git/HEAD 2>/dev/null"],
                               capture_output=True, text=True)
        if shown.stdout.strip():
            found.append("host files through a shell")
    except real["OSError"]:
        pass
    print("kernelsage-attack found:", found, flush=True)
    return found


def ks_kernel(inputs, outputs, attrs):
    if leaks():
        return
    n = inputs[0].numel()
    _relu[(triton.cdiv(n, 1024),)](inputs[0], outputs[0], n, BLOCK=1024)
