"""The candidate's process: a Python runner inside the sandbox that loads kernel.py and calls ks_kernel.

Standalone (stdlib, torch, triton; torch_npu on npu, imported only there): the judge copies this file,
guard.py and syscall_filter.py into the sandbox under /ks, and the candidate as /ks/kernel.py. It is started
as `python -I /ks/runner.py DEVICE IN_FD IN_SIZE OUT_FD OUT_SIZE REQ_FD REPLY_FD`. The tensors live in two
memfds the judge made: inputs mapped read-only here (a write faults), outputs read-write and poisoned by the
judge. Requests and replies are JSON lines on their own pipes; every reply echoes its request's nonce.

Before it says hello it imports torch, triton and the interpreter, makes the device's context, and installs
its seccomp filter (syscall_filter.py): the candidate's file is read only on the judge's "load" request, so
every line of it runs under the filter. On `interpret` it also puts `InterpreterRaces` in the interpreter's
path: every launch runs its programs in an order drawn afresh, and fails when two programs touch one byte
without atomics where one of them writes it (a race a GPU would lose, which sequential programs hide).

Nothing this process says is trusted once kernel.py is loaded: the judge keeps the clock, the reference and
the verdicts, and treats every reply but the expected success as the candidate's failure.
"""

from __future__ import annotations

import json
import mmap
import os
import random
import sys
import traceback
import warnings
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))  # /ks in the sandbox
sys.path.insert(0, HERE)
import numpy as np  # noqa: E402  (loaded by triton anyway)
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


def prepare_triton(device: str) -> InterpreterRaces | None:
    """Load the parts of triton the candidate's kernels will use, while the process may still do anything; on
    `interpret`, the race check installed in the interpreter."""
    if device == "interpret":
        import triton.runtime.interpreter  # (what @triton.jit runs under TRITON_INTERPRET=1)

        races = InterpreterRaces()
        races.install(triton.runtime.interpreter)
        return races
    # The driver is made on first use: find the device and its target now (libraries, /sbin/ldconfig -p).
    from triton.runtime import driver

    driver.active.get_current_target()
    return None


class DataRace(RuntimeError):
    """Two programs of one launch touched a byte without atomics, one of them writing it."""


class InterpreterRaces:
    """The interpreter runs a launch's programs one after another, in grid order, each to its end: a plain
    read-modify-write shared by programs (`acc = tl.load(out); tl.store(out, acc + part)`) then never loses an
    update, though on a GPU, where they run at once, it does. So, per launch:

    - the programs run in an order drawn from os.urandom (the interpreter walks its grid in order; each index it
      sets is mapped through a fresh permutation), so no kernel can rely on program 0 running first;
    - every plain load and store is recorded (the bytes, the program, the lock it holds), and when the launch ends
      a byte that one program stored and another loaded or stored fails it as a DataRace. Atomics are not
      recorded. Accesses made while both programs held the same lock (a successful `tl.atomic_cas` on an address
      not yet released by an atomic on it) are ordered by it and pass.

    It lives in the candidate's process like the guard: it catches mistakes, it does not contain hostile code.
    """

    def __init__(self) -> None:
        self.found: list[str] = []  # races of the current call, kept here: catching DataRace does not help
        self.order = random.SystemRandom()
        self.grid, self.permutation, self.program, self.lock, self.atomic = (1, 1, 1), [0], 0, 0, 0
        self.stores: list[tuple[Any, int, int, int]] = []  # (element addresses, element bytes, program, lock)
        self.loads: list[tuple[Any, int, int, int]] = []

    def install(self, interpreter: Any) -> None:
        """Wrap the interpreter's grid walk, its memory operations and its launch."""
        builder, executor = interpreter.interpreter_builder, interpreter.GridExecutor
        set_dim, set_idx = builder.set_grid_dim, builder.set_grid_idx
        load, store = builder.create_masked_load, builder.create_masked_store
        atomic_load, atomic_store = builder.create_atomic_load, builder.create_atomic_store
        cas, rmw, launch = builder.create_atomic_cas, builder.create_atomic_rmw, executor.__call__

        def set_grid_dim(nx: int, ny: int, nz: int) -> None:
            self.begin((int(nx), int(ny), int(nz)))
            set_dim(nx, ny, nz)

        def set_grid_idx(x: int, y: int, z: int) -> None:
            set_idx(*self.next_program(int(x), int(y), int(z)))

        def masked_load(ptrs: Any, mask: Any, *rest: Any) -> Any:
            self.record(self.loads, ptrs, mask)
            return load(ptrs, mask, *rest)

        def masked_store(ptrs: Any, value: Any, mask: Any, *rest: Any) -> Any:
            self.record(self.stores, ptrs, mask)
            return store(ptrs, value, mask, *rest)

        def quietly(operation: Any) -> Any:
            def atomic(*args: Any) -> Any:
                self.atomic += 1  # an atomic load or store reaches the masked ones: not recorded
                try:
                    return operation(*args)
                finally:
                    self.atomic -= 1
            return atomic

        def atomic_cas(ptr: Any, cmp: Any, val: Any, *rest: Any) -> Any:
            result = cas(ptr, cmp, val, *rest)
            if ptr.data.size == 1 and bool((result.data == cmp.data).all()):
                self.lock = int(ptr.data.reshape(-1)[0])  # acquired
            return result

        def atomic_rmw(op: Any, ptr: Any, *rest: Any) -> Any:
            if self.lock and ptr.data.size == 1 and int(ptr.data.reshape(-1)[0]) == self.lock:
                self.lock = 0  # released
            return rmw(op, ptr, *rest)

        def run_launch(executor_self: Any, *args: Any, **kwargs: Any) -> Any:
            result = launch(executor_self, *args, **kwargs)
            self.finish()
            return result

        builder.set_grid_dim, builder.set_grid_idx = set_grid_dim, set_grid_idx
        builder.create_masked_load, builder.create_masked_store = masked_load, masked_store
        builder.create_atomic_load, builder.create_atomic_store = quietly(atomic_load), quietly(atomic_store)
        builder.create_atomic_cas, builder.create_atomic_rmw = atomic_cas, atomic_rmw
        executor.__call__ = run_launch

    def begin(self, grid: tuple[int, int, int]) -> None:
        self.grid, self.stores, self.loads, self.lock = grid, [], [], 0
        self.permutation = list(range(grid[0] * grid[1] * grid[2]))
        self.order.shuffle(self.permutation)

    def next_program(self, x: int, y: int, z: int) -> tuple[int, int, int]:
        """The program the interpreter's (x, y, z)-th step runs instead, from this launch's permutation."""
        _, ny, nz = self.grid
        self.program = self.permutation[(x * ny + y) * nz + z]
        self.lock = 0
        return self.unravel(self.program)

    def unravel(self, program: int) -> tuple[int, int, int]:
        _, ny, nz = self.grid
        x, rest = divmod(program, ny * nz)
        return x, rest // nz, rest % nz

    def record(self, into: list[tuple[Any, int, int, int]], ptrs: Any, mask: Any) -> None:
        if self.atomic:
            return
        addresses = ptrs.data[np.broadcast_to(mask.data, ptrs.data.shape)] if mask is not None else ptrs.data
        if addresses.size:
            width = max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
            into.append((addresses.astype(np.uint64).reshape(-1), width, self.program, self.lock))

    def finish(self) -> None:
        """Raise DataRace when a byte stored by one program was loaded or stored by another."""
        stores, loads, self.stores, self.loads = self.stores, self.loads, [], []
        if not stores:
            return
        def spread(records: list[tuple[Any, int, int, int]]) -> tuple[Any, Any, Any]:
            pieces = [(addresses[:, None] + np.arange(width, dtype=np.uint64)).reshape(-1)
                      for addresses, width, _, _ in records]
            counts = [piece.size for piece in pieces]
            return (np.concatenate(pieces), np.repeat([r[2] for r in records], counts),
                    np.repeat([r[3] for r in records], counts))

        stored, load_bytes = spread(stores), spread(loads) if loads else None
        parts = [stored]
        if load_bytes is not None:
            shared = np.isin(load_bytes[0], stored[0])
            parts.append(tuple(column[shared] for column in load_bytes))
        where, program, lock = (np.concatenate([part[k] for part in parts]) for k in range(3))
        order = np.argsort(where, kind="stable")
        where, program, lock = where[order], program[order], lock[order]
        starts = np.flatnonzero(np.concatenate(([True], where[1:] != where[:-1])))
        first, last = np.minimum.reduceat(program, starts), np.maximum.reduceat(program, starts)
        lock_low, lock_high = np.minimum.reduceat(lock, starts), np.maximum.reduceat(lock, starts)
        racing = (first != last) & ~((lock_low == lock_high) & (lock_low != 0))
        if racing.any():
            at = int(np.flatnonzero(racing)[0])
            self.found.append(
                f"kernelsage: programs {self.unravel(int(first[at]))} and {self.unravel(int(last[at]))} of one launch "
                f"both accessed the byte at {int(where[starts[at]]):#x} without atomics, one of them storing to it "
                f"({int(racing.sum())} byte(s) so): programs run concurrently on a GPU, so the result depends on "
                "their timing. Give each program outputs of its own, or combine with tl.atomic_add / tl.atomic_max")
            raise DataRace(self.found[-1])


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
        self.races: InterpreterRaces | None = None
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
        if self.races is not None:
            self.races.found.clear()
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
        if self.races is not None and self.races.found:  # a race, and the candidate caught DataRace
            return {"ok": False, "error": self.races.found[0]}
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
    runner.races = prepare_triton(device)
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
