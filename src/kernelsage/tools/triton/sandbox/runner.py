"""The candidate's process: a Python runner inside the sandbox that loads kernel.py and calls ks_kernel.

Standalone (stdlib, torch, triton; torch_npu on npu, imported only there): the judge copies this file,
guard.py and syscall_filter.py into the sandbox under /ks, and the candidate as /ks/kernel.py. It is started
as `python -I /ks/runner.py DEVICE IN_FD IN_SIZE OUT_FD OUT_SIZE REQ_FD REPLY_FD`. The tensors live in two
memfds the judge made: inputs mapped read-only here (a write faults), outputs read-write and poisoned by the
judge. Requests and replies are JSON lines on their own pipes; every reply echoes its request's nonce.

Before it says hello it imports torch, triton and the interpreter, makes the device's context, and installs
its seccomp filter (syscall_filter.py): the candidate's file is read only on the judge's "load" request, so
every line of it runs under the filter.

Nothing this process says is trusted once kernel.py is loaded: the judge keeps the clock, the reference and
the verdicts, and treats every reply but the expected success as the candidate's failure.
"""

from __future__ import annotations

import json
import mmap
import os
import sys
import traceback
import warnings
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))  # /ks in the sandbox
sys.path.insert(0, HERE)
import torch  # noqa: E402
import triton  # noqa: E402  (loaded before the filter; the candidate's imports find it loaded)
import triton.language  # noqa: E402,F401
from guard import Refusals, compute_guard, load_candidate  # noqa: E402
from syscall_filter import install as install_syscall_filter  # noqa: E402

KERNEL_FILE = os.path.join(HERE, "kernel.py")
ERROR_CHARS = 3000
L2_FLUSH_BYTES = 256 << 20  # larger than any GPU's L2 today (H100/H200: 50 MiB, Ascend 910B: 192 MiB)


class Device:
    """Where the tensors live: the memfd views themselves (interpret), or copies on a GPU / NPU."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.module: Any = None
        if name == "cuda":
            self.module = torch.cuda
        elif name == "npu":
            import torch_npu  # noqa: F401  (registers torch.npu; needs CANN, so only ever imported here)

            self.module = torch.npu
        self.flush_buffer = None if self.module is None else torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8,
                                                                         device=name)

    def stage(self, inputs: list[torch.Tensor], outputs: list[torch.Tensor]) -> tuple[list, list]:
        """The tensors ks_kernel gets, with the judge's inputs and poisoned outputs; caches flushed."""
        if self.module is None:
            return inputs, outputs
        staged_in = [t.to(self.name) for t in inputs]
        staged_out = [t.to(self.name) for t in outputs]
        assert self.flush_buffer is not None
        self.flush_buffer.zero_()  # evict the inputs from L2: every call starts with cold caches
        self.module.synchronize()
        return staged_in, staged_out

    def finish(self, staged: list[torch.Tensor], outputs: list[torch.Tensor]) -> None:
        """Wait for the device, then copy the outputs back where the judge reads them."""
        if self.module is None:
            return
        self.module.synchronize()
        for device_tensor, host in zip(staged, outputs, strict=True):
            host.copy_(device_tensor)


def prepare_triton(device: str) -> None:
    """Load the parts of triton the candidate's kernels will use, while the process may still do anything."""
    if device == "interpret":
        import triton.runtime.interpreter  # noqa: F401  (what @triton.jit runs under TRITON_INTERPRET=1)
        return
    # The driver is made on first use: find the device and its target now (libraries, /sbin/ldconfig -p).
    from triton.runtime import driver

    driver.active.get_current_target()


def view(mapping: Any, place: dict[str, Any]) -> torch.Tensor:
    dtype, shape = getattr(torch, place["dtype"]), tuple(place["shape"])
    count = 1
    for size in shape:
        count *= int(size)
    if count == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(mapping, dtype=dtype, count=count, offset=int(place["offset"])).view(shape)


def short_error() -> str:
    text = traceback.format_exc()
    return text if len(text) <= ERROR_CHARS else "...\n" + text[-ERROR_CHARS:]


class Runner:
    def __init__(self, device: str, in_fd: int, in_size: int, out_fd: int, out_size: int) -> None:
        self.inputs = mmap.mmap(in_fd, max(in_size, 1), prot=mmap.PROT_READ)
        self.outputs = mmap.mmap(out_fd, max(out_size, 1))
        self.device = Device(device)
        self.kernel: Any = None
        self.staged: tuple[list, list, list, dict] | None = None

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op == "ping":
            return {"ok": True}
        if op == "load":
            try:
                self.kernel = load_candidate(KERNEL_FILE)
            except BaseException:
                return {"ok": False, "error": short_error()}
            return {"ok": True}
        if op == "stage":
            host_in = [view(self.inputs, p) for p in request["inputs"]]
            host_out = [view(self.outputs, p) for p in request["outputs"]]
            staged_in, staged_out = self.device.stage(host_in, host_out)
            self.staged = (staged_in, staged_out, host_out, dict(request["attrs"]))
            return {"ok": True}
        if op == "run":
            return self.run()
        return {"ok": False, "error": f"unknown request {op!r}"}

    def run(self) -> dict[str, Any]:
        if self.kernel is None or self.staged is None:
            return {"ok": False, "error": "run before load and stage"}
        staged_in, staged_out, host_out, attrs = self.staged
        refusals = Refusals()
        try:
            with compute_guard(refusals):
                result = self.kernel(list(staged_in), list(staged_out), dict(attrs))
            self.device.finish(staged_out, host_out)
        except BaseException:
            error = short_error()
            if refusals.names:
                return {"ok": False, "forbidden": refusals.names[:5], "error": error}
            return {"ok": False, "error": error}
        if refusals.names:  # refused, and the candidate caught the exception
            return {"ok": False, "forbidden": refusals.names[:5], "error": ""}
        if result is not None:
            return {"ok": False, "error": f"ks_kernel returned {type(result).__name__}; it must return None"}
        return {"ok": True}


def main(argv: list[str]) -> None:
    device, in_fd, in_size, out_fd, out_size, req_fd, reply_fd = argv
    warnings.simplefilter("ignore")  # frombuffer on the read-only inputs warns on every call
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # the candidate's prints go to the log, never onto the reply pipe
    runner = Runner(device, int(in_fd), int(in_size), int(out_fd), int(out_size))
    prepare_triton(device)
    try:
        install_syscall_filter(device)
    except OSError as error:  # never run the candidate without it
        sys.stderr.write(f"kernelsage runner: {error}\n")
        sys.exit(70)
    requests = os.fdopen(int(req_fd), "r", encoding="utf-8")
    replies = os.fdopen(int(reply_fd), "w", encoding="utf-8")
    replies.write(json.dumps({"hello": True}) + "\n")
    replies.flush()
    for line in requests:
        request = json.loads(line)
        reply = runner.handle(request)
        replies.write(json.dumps({**reply, "nonce": request.get("nonce")}) + "\n")
        replies.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
