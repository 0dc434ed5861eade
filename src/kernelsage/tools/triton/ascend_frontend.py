"""The `npu-frontend` device: triton-ascend's compiler on a machine without CANN or an NPU, as far as it goes.

triton-ascend installs the `triton` package too, so it lives in a virtual environment of its own
(`.venv-triton-ascend`, or the interpreter KERNELSAGE_TRITON_ASCEND_PYTHON names) and never in this process.
A job of the sandbox worker (the trusted side, which loads the task and works out each case's shapes on the
meta device) starts that interpreter in the runner's sandbox (bubblewrap, the runner's seccomp filter with
the npu policy, the interpreter's prefixes bound read-only) on sandbox/ascend_frontend.py, which imports the
candidate, records every launch of its @triton.jit kernels and compiles each through the stages before the
NPU binary. What cannot run on an NPU whatever the front end makes of it (inline assembly, CUDA-only modules,
fp64: `source_check.npu_problems`) is refused first, as a compile error at its line. Its report becomes a `CompileResult` shaped as C++ compile feedback: the errors with their lines
in kernel.py (COMPILE_ERROR), or OK with a note naming the last stage reached and the one that needs CANN.
Nothing is verified or timed on this device.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import select
import subprocess
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from kernelsage.tasks.model import Task
from kernelsage.tools.isolation import Isolation, Rlimits, popen_options, sandboxed
from kernelsage.tools.judging.arena import sealed_memfd
from kernelsage.tools.results import Artifact, CompileResult, CompilerMessage, Status
from kernelsage.tools.triton.python_view import python_binds, usable
from kernelsage.tools.triton.source_check import FILE, npu_problems

PYTHON_ENV = "KERNELSAGE_TRITON_ASCEND_PYTHON"
VENV = ".venv-triton-ascend"
STAGES = ("ast-to-ttir", "ttir", "ttadapter")  # triton-ascend 3.2.0's stages for an NPU before the binary's
BINARY_STAGE, BINARY_TOOL = "npubin", "bishengir-compile"
REPORT_BYTES = 1 << 20
LOG_TAIL_BYTES = 3000
PYTHON_ADDRESS_SPACE = 6 << 30  # Python, torch, libtriton mapped, and triton-adapter-opt started from there
PROBE = ("import json, sys\nfrom importlib.metadata import version\nimport torch, pybind11, triton.backends as b\n"
         "print(json.dumps({'executable': sys.executable, 'prefixes': [sys.base_prefix, sys.prefix], "
         "'triton': version('triton-ascend'), 'torch': torch.__version__, 'ascend': 'ascend' in b.backends}))")


@dataclass(frozen=True)
class Interpreter:
    """triton-ascend's Python, as probed: where it is, its prefixes, what it holds, or why it cannot serve."""

    path: str
    executable: str = ""
    prefixes: tuple[str, ...] = ()
    triton: str = ""
    torch: str = ""
    problem: str = ""

    @property
    def usable(self) -> bool:
        return not self.problem


def interpreter_path() -> str:
    """KERNELSAGE_TRITON_ASCEND_PYTHON, else .venv-triton-ascend/bin/python of the project (beside src/, as
    scripts/install.sh makes it), else of the working directory."""
    named = os.environ.get(PYTHON_ENV, "").strip()
    if named:
        return named
    project = Path(__file__).resolve().parents[4] / VENV / "bin" / "python"
    return str(project if project.exists() else Path.cwd() / VENV / "bin" / "python")


@functools.lru_cache(maxsize=4)
def probe(path: str) -> Interpreter:
    """Import triton-ascend's compiler, torch and pybind11 with `path` (a child process; nothing of them here)."""
    if not os.access(path, os.X_OK):
        return Interpreter(path, problem=f"no triton-ascend interpreter at {path}: run scripts/install.sh (it makes "
                                         f"{VENV}) or set {PYTHON_ENV} to a Python with triton-ascend 3.2.0, torch "
                                         "and pybind11 (docs/triton.md)")
    try:
        completed = subprocess.run([path, "-I", "-c", PROBE], capture_output=True, text=True, timeout=120, check=False,
                                   env={"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"})
        found = json.loads(completed.stdout.strip().splitlines()[-1]) if completed.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as exc:
        return Interpreter(path, problem=f"{path} did not answer the probe: {type(exc).__name__}: {exc}")
    if found is None:
        last = (completed.stderr.strip().splitlines() or [f"exit code {completed.returncode}"])[-1][:200]
        return Interpreter(path, problem=f"{path} cannot import triton-ascend, torch and pybind11 ({last})")
    if not found["ascend"]:
        return Interpreter(path, problem=f"the triton at {path} has no ascend backend: install triton-ascend there")
    prefixes = tuple(dict.fromkeys(os.path.realpath(p) for p in found["prefixes"]))
    return Interpreter(path, found["executable"], prefixes, found["triton"], found["torch"])


def frontend_status(isolation: Isolation) -> tuple[bool, str]:
    """Whether the front end can run here, with what, or why not."""
    found = probe(interpreter_path())
    if not found.usable:
        return False, found.problem
    hidden = usable(isolation, found.prefixes)
    if hidden:
        return False, hidden
    return True, (f"triton-ascend {found.triton} (torch {found.torch}) at {found.path}: compiles through "
                  f"{', '.join(STAGES)}; {BINARY_STAGE} needs CANN ({BINARY_TOOL}); nothing runs or is timed")


# The job (trusted side, in a child of the sandbox worker) ----------------------------------------------------

def task_cases(task: Task) -> tuple[list[dict[str, Any]], list[str]]:
    """Every case (the performance case too) as the front end launches it: input and output shapes and dtypes
    and the attributes, worked out on the meta device; and the cases that cannot be described so, with why."""
    from kernelsage.tasks.interface import case_interface

    cases, skipped, seen = [], [], set()
    for case in (*task.cases, task.perf_case):
        if case.name in seen:
            continue
        seen.add(case.name)
        interface = case_interface(task, case)
        if interface.inputs is None or interface.outputs is None:
            skipped.append(f"{case.name}: {interface.note or interface.error or 'no shapes'}")
            continue
        cases.append({"name": case.name, "attrs": dict(interface.attrs),
                      "inputs": [{"dtype": s.dtype, "shape": list(s.shape)} for s in interface.inputs],
                      "outputs": [{"dtype": s.dtype, "shape": list(s.shape)} for s in interface.outputs]})
    return cases, skipped


# Element types triton-ascend has no kernels for on Ascend A2/A3 NPUs (its API reference's dtype tables mark fp64,
# the fp8 types and the unsigned 16- to 64-bit integers unsupported), and complex numbers, which Triton has no type
# for: a task with such an input or output cannot be run through MultiKernelBench's triton_ascend track.
NPU_DTYPES_MISSING = frozenset({"float64", "complex64", "complex128", "uint16", "uint32", "uint64",
                                "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"})


def npu_task_problem(cases: list[dict[str, Any]]) -> str:
    """Why a task cannot run as Triton on an Ascend NPU, from its cases as `tasks.interface.task_runs` describes
    them ('' where nothing is known against it): an input or output dtype triton-ascend lacks there."""
    for case in cases:
        for role in ("inputs", "outputs"):
            for spec in case.get(role) or ():
                if spec["dtype"] in NPU_DTYPES_MISSING:
                    return (f"case {case['case']}: {role[:-1]} {spec['name']} is {spec['dtype']}, which triton-ascend "
                            "has no kernels for on Ascend A2/A3 NPUs")
    return ""


def sandbox_files(kernel_source: str, cases: list[dict[str, Any]]) -> dict[str, bytes]:
    package = resources.files("kernelsage.tools.triton.sandbox")
    trusted = {name: package.joinpath(name).read_bytes()
               for name in ("ascend_frontend.py", "guard.py", "syscall_filter.py")}
    return {**trusted, "kernel.py": kernel_source.encode(), "cases.json": json.dumps(cases).encode()}


def run_job(payload: dict[str, Any], task: Task, emit: Any) -> None:
    """The `frontend` job: the cases, then the sandboxed front end on them; its report (or how it ended)."""
    emit({"kind": "phase", "phase": "harness"})
    source = Path(payload["source"]).read_text(encoding="utf-8")
    if hashlib.sha256(source.encode()).hexdigest() != payload["source_sha256"]:
        raise RuntimeError(f"{payload['source']} changed since it was checked; compile the candidate again")
    refused = npu_problems(source)
    if refused:  # it could not run on an NPU whatever triton-ascend's front end made of it
        errors = [{"line": p.line, "column": p.column, "message": p.message} for p in refused]
        emit({"kind": "result", "data": {"report": {"errors": errors, "kernels": []}, "exit_code": None,
                                         "log_tail": "", "skipped": [], "timed_out": False, "cases": []}})
        return
    cases, skipped = task_cases(task)
    emit({"kind": "phase", "phase": "compile"})
    report, code, log, timed_out = start(source, cases, payload)
    emit({"kind": "result", "data": {"report": report, "exit_code": code, "log_tail": log, "skipped": skipped,
                                     "timed_out": timed_out, "cases": [c["name"] for c in cases]}})


def start(source: str, cases: list[dict[str, Any]],
          payload: dict[str, Any]) -> tuple[Any, int | None, str, bool]:
    """Run the front end in the sandbox: its report (None when it gave none), exit code, log tail, and whether
    it ran out of time (then it is killed)."""
    isolation, limits = Isolation(**payload["isolation"]), payload["limits"]
    files = sandbox_files(source, cases)
    report_read, report_write = os.pipe()
    os.set_inheritable(report_write, True)
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/tmp", "TMPDIR": "/tmp",
           "TRITON_CACHE_DIR": "/tmp/triton-cache", "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1",
           "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    rlimits = Rlimits(address_space=int(limits["memory_bytes"]) + PYTHON_ADDRESS_SPACE, cpu_s=int(limits["cpu_s"]),
                      file_bytes=int(limits["file_bytes"]), processes=512)
    python = payload["python"]
    data_fds: dict[str, int] = {}
    if isolation.available:
        data_fds = {name: sealed_memfd(f"kernelsage-{name}", data) for name, data in files.items()}
        command = sandboxed(isolation, [python, "-I", "-B", "/ks/ascend_frontend.py", str(report_write)], env=env,
                            limits=rlimits, ro_binds=python_binds(isolation, payload["prefixes"]),
                            data_files=[(fd, f"/ks/{name}", 0o444) for name, fd in data_fds.items()])
    else:  # unsafe: the files in the job's directory, the front end with this user's rights
        folder = Path.cwd() / "ks"
        folder.mkdir(exist_ok=True)
        for name, data in files.items():
            (folder / name).write_bytes(data)
        command = sandboxed(isolation, [python, "-I", "-B", str(folder / "ascend_frontend.py"), str(report_write)],
                            env=env, limits=rlimits)
    log_path = Path.cwd() / "frontend.log"
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                   pass_fds=[report_write, *data_fds.values()],
                                   env=env if not isolation.available else {}, **popen_options(isolation))
    finally:
        for fd in (log, report_write, *data_fds.values()):
            os.close(fd)
    data, timed_out = _read_report(report_read, time.monotonic() + float(limits["wall_s"]))
    try:
        code = process.wait(timeout=0.1 if timed_out else 5)
    except subprocess.TimeoutExpired:
        process.kill()
        code = process.wait()
    tail = log_path.read_bytes()[-LOG_TAIL_BYTES:].decode(errors="replace") if log_path.exists() else ""
    try:
        report = json.loads(data) if data.strip() else None
    except ValueError:
        report = None
    return report, code, tail, timed_out


def _read_report(fd: int, deadline: float) -> tuple[bytes, bool]:
    """What the front end writes to its report pipe until it closes it (at most REPORT_BYTES), and whether
    the deadline passed first."""
    chunks, size = [], 0
    try:
        while size <= REPORT_BYTES:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return b"", True
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks), False


# The backend's side: the report as compile feedback ---------------------------------------------------------

def compile_result(data: dict[str, Any], artifact: Artifact, seconds: float, wall_s: float) -> CompileResult:
    """The front end's report as C++ compile feedback: COMPILE_ERROR (FORBIDDEN for borrowed compute) with
    the errors at their lines in kernel.py, or OK with the stages reached and what stopped it."""
    report = data.get("report")
    if data.get("timed_out"):
        message = f"the triton-ascend front end was killed after the wall-clock limit of {wall_s:g} s"
        return CompileResult(ok=False, status=Status.TIMEOUT, log=message, seconds=seconds,
                             errors=[CompilerMessage(file=FILE, line=0, column=0, severity="error", message=message)])
    if not isinstance(report, dict) or not isinstance(report.get("errors"), list):
        tail = str(data.get("log_tail", "")).strip().splitlines()
        message = (f"the triton-ascend front end ended without a report (exit code {data.get('exit_code')})"
                   + (f": {tail[-1][:300]}" if tail else ""))
        return CompileResult(ok=False, status=Status.COMPILE_ERROR, log=message + "\n" + "\n".join(tail[-20:]),
                             errors=[CompilerMessage(file=FILE, line=0, column=0, severity="error", message=message)],
                             seconds=seconds)
    errors = [_message(item) for item in report["errors"][:20] if isinstance(item, dict)]
    listed = report.get("kernels")
    kernels = [k for k in listed if isinstance(k, dict)] if isinstance(listed, list) else []
    lines = [_kernel_line(k) for k in kernels[:20]]
    if data.get("skipped"):
        lines.append("cases not launched (no shape-only description): " + "; ".join(data["skipped"]))
    if errors:
        forbidden = any(e.message.startswith("forbidden:") for e in errors)
        log = "\n".join([*(f"{e.file}:{e.line}:{e.column}: error: {e.message}" for e in errors), *lines])
        return CompileResult(ok=False, status=Status.FORBIDDEN if forbidden else Status.COMPILE_ERROR, log=log,
                             errors=errors, seconds=seconds,
                             reason="; ".join(e.message for e in errors[:5]) if forbidden else "")
    tool = str(report.get("binary_tool", ""))
    stages = _stages(kernels[0]) if kernels else []
    last = stages[-1] if stages else "nothing"
    why = f"{BINARY_TOOL} not found" if not tool else f"{BINARY_TOOL} at {tool} is not run by the front end"
    note = (f"compiled through {last} (triton-ascend {report.get('triton', '?')}, {len(kernels)} kernel "
            f"specialisation{'s' if len(kernels) != 1 else ''}, cases {', '.join(data.get('cases', []))}); "
            f"{BINARY_STAGE} needs CANN ({why}): not compiled here. Nothing was run or verified: use --device npu "
            "on an Ascend host")
    return CompileResult(ok=True, status=Status.OK, log="\n".join([note, *lines]), seconds=seconds,
                         artifact=artifact)


def _message(item: dict[str, Any]) -> CompilerMessage:
    stage = str(item.get("stage", ""))
    text = str(item.get("message", ""))[:2000]
    prefix = "" if text.startswith("forbidden:") else f"[triton-ascend {stage}] " if stage else ""
    return CompilerMessage(file=FILE, line=_int(item.get("line")), column=_int(item.get("column")),
                           severity="error", message=prefix + text)


def _mapping(value: Any) -> dict[Any, Any]:
    return value if isinstance(value, dict) else {}


def _stages(kernel: dict[str, Any]) -> list[str]:
    """The stages a kernel reached, as the report says; the report comes from the candidate's process, so
    anything but a list of names counts as none."""
    stages = kernel.get("stages")
    return [str(stage) for stage in stages] if isinstance(stages, list) else []


def _kernel_line(kernel: dict[str, Any]) -> str:
    signature = ", ".join(f"{k}: {v}" for k, v in _mapping(kernel.get("signature")).items())
    constants = ", ".join(f"{k}={v}" for k, v in _mapping(kernel.get("constants")).items())
    stages = _stages(kernel)
    reached = f"compiled through {stages[-1]}" if stages else "not compiled"
    failed = f", failed in {kernel['failed_stage']}" if kernel.get("failed_stage") else ""
    stopped = f", stopped before {kernel['stopped_before']}" if kernel.get("stopped_before") else ""
    took = f" ({kernel['seconds']:.2f} s" if isinstance(kernel.get("seconds"), (int, float)) else ""
    if took and stages and isinstance(kernel.get("ir_chars"), int):
        took += f", {kernel['ir_chars']} characters of {stages[-1]} IR"
    took += ")" if took else ""
    return (f"kernel {kernel.get('kernel')}({signature}{'; ' + constants if constants else ''}), first launched in "
            f"case {kernel.get('case')}: {reached}{failed}{stopped}{took}")


def _int(value: Any) -> int:
    try:
        return max(int(value), 0)
    except (TypeError, ValueError):
        return 0
