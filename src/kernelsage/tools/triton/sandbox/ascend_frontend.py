"""triton-ascend's front end on a machine without CANN: record every launch of ks_kernel's @triton.jit kernels
and compile each through triton-ascend's stages as far as they go, without an NPU and without running anything.

Standalone (stdlib, torch, triton-ascend, pybind11; never kernelsage): the trusted side copies this file,
guard.py and syscall_filter.py into the sandbox under /ks, with the candidate as /ks/kernel.py and the cases
as /ks/cases.json, and starts it with triton-ascend's interpreter (a virtual environment of its own: it
installs the `triton` package too) as `python -I -B /ks/ascend_frontend.py REPORT_FD`. The report, one JSON
object, goes to REPORT_FD; the candidate's prints go to the log.

Before reading kernel.py it imports torch and triton, puts a stand-in driver in place of the NPU's (the
target is an Ascend NPU, and nothing can launch) and installs the runner's seccomp filter with the npu
policy: the adapter stage runs a program (triton-adapter-opt), which the interpret policy would refuse.

For every case, ks_kernel runs on meta tensors of the case's shapes and dtypes (no data, no memory) under
the runner's guard; triton's own launch path binds the arguments and works out each kernel's signature and
constants, then calls `triton.compiler.compile`, which is replaced here: it runs the stages and hands back a
kernel whose launch only records the grid. The stages, as triton-ascend 3.2.0 defines them for an NPU target:

  ast-to-ttir  the Python AST to Triton IR (libtriton, in this process): triton's front-end errors
  ttir         Triton IR passes (libtriton, in this process)
  ttadapter    Triton IR to linalg/HIVM IR (triton-adapter-opt, a program shipped in the wheel)
  npubin       the NPU binary (bishengir-compile, from CANN): not run here; the report says whether found

Nothing this process reports is trusted: the candidate runs in it and could write its own report. It only
ever shapes the candidate's own compile feedback; nothing of it is verified or timed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))  # /ks in the sandbox
sys.path.insert(0, HERE)
import torch  # noqa: E402
import triton  # noqa: E402
import triton.compiler  # noqa: E402
import triton.language  # noqa: E402
from guard import Refusals, compute_guard, load_candidate  # noqa: E402
from syscall_filter import install as install_syscall_filter  # noqa: E402
from triton._C.libtriton import ir  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler.errors import CompilationError  # noqa: E402
from triton.runtime.autotuner import Autotuner  # noqa: E402
from triton.runtime.driver import driver  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402

KERNEL_FILE = os.path.join(HERE, "kernel.py")
CASES_FILE = os.path.join(HERE, "cases.json")
ARCH = "Ascend910B3"  # the target's name reaches only bishengir-compile (npubin), which does not run here
BINARY_STAGE, BINARY_TOOL = "npubin", "bishengir-compile"
MAX_ERRORS, MESSAGE_CHARS = 20, 2000
# An MLIR diagnostic located in the candidate's file: /ks/kernel.py:12:9: error: ... (or loc("/ks/kernel.py":12:9): ...)
MLIR_DIAGNOSTIC = re.compile(r'(?:[^\s"]*/)?kernel\.py"?:(\d+):(\d+)\)?:\s*(error|warning|note|remark):\s*(.*)')


class FrontEndFailure(Exception):
    """A stage refused the kernel; `diagnostics` say where and why."""

    def __init__(self, stage: str, diagnostics: list[dict[str, Any]]) -> None:
        super().__init__(stage)
        self.stage, self.diagnostics = stage, diagnostics


def diagnostic(line: int, column: int, message: str, *, stage: str, kernel: str,
               severity: str = "error") -> dict[str, Any]:
    return {"file": "kernel.py", "line": int(line), "column": int(column), "severity": severity,
            "message": message.strip()[:MESSAGE_CHARS], "stage": stage, "kernel": kernel}


class StandInDriver:
    """What triton's launch path asks of the active driver, for an Ascend target with no device here."""

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int = 0) -> int:
        return 0

    def get_current_target(self) -> GPUTarget:
        return GPUTarget("npu", ARCH, 0)

    def set_current_device(self, device: int) -> None:
        pass

    def get_benchmarker(self) -> Any:
        """Asked for when @triton.autotune decorates; never called: autotuning here compiles every config."""

        def cannot_time(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("nothing is timed on npu-frontend")

        return cannot_time


class RecordedKernel:
    """What the replaced compile hands back: a kernel whose launch records the grid and runs nothing."""

    function = None
    packed_metadata = None

    def __init__(self, record: dict[str, Any], case: str) -> None:
        self.record, self.case = record, case

    def launch_metadata(self, grid: Any, stream: Any, *args: Any) -> None:
        self.record["grids"].setdefault(self.case, [int(g) for g in grid])

    def _init_handles(self) -> None:
        pass

    def run(self, *args: Any) -> None:
        self.record["launches"] += 1


class FrontEnd:
    """The launches seen and the kernels compiled, in order; each distinct specialisation compiled once."""

    def __init__(self) -> None:
        self.case = ""
        self.kernels: list[dict[str, Any]] = []
        self.by_key: dict[str, dict[str, Any]] = {}
        self.tool = shutil.which(BINARY_TOOL) or ""

    def compile(self, src: Any, target: Any = None, options: dict[str, Any] | None = None) -> RecordedKernel:
        """triton.compiler.compile for the launch path: every stage before the NPU binary, then a recorder."""
        fn = src.fn
        constants = {str(k): _plain(v) for k, v in dict(src.constants).items()}
        key = json.dumps([fn.__name__, dict(src.signature), constants, sorted((options or {}).items())],
                         sort_keys=True, default=str)
        record = self.by_key.get(key)
        if record is None:
            record = {"kernel": fn.__name__, "case": self.case, "signature": dict(src.signature),
                      "constants": constants, "stages": [], "stopped_before": "", "grids": {}, "launches": 0}
            self.by_key[key] = record
            self.kernels.append(record)
            started = time.perf_counter()
            try:
                self._stages(src, target or StandInDriver().get_current_target(), options or {}, record)
            finally:
                record["seconds"] = round(time.perf_counter() - started, 3)
        if record.get("errors"):
            raise FrontEndFailure(record["failed_stage"], record["errors"])
        return RecordedKernel(record, self.case)

    def _stages(self, src: Any, target: Any, options: dict[str, Any], record: dict[str, Any]) -> None:
        backend = triton.compiler.make_backend(target)
        parsed = backend.parse_options(options)
        stages: dict[str, Any] = {}
        backend.add_stages(stages, parsed)
        metadata = {"hash": "frontend", "target": target, **parsed.__dict__}
        context = ir.context()
        ir.load_dialects(context)
        backend.load_dialects(context)
        name = src.fn.__name__
        try:
            module = src.make_ir(parsed, backend.get_codegen_implementation(), backend.get_module_map(), context)
        except CompilationError as error:
            _fail(record, "ast-to-ttir", [triton_error(error, src.fn)])
        except Exception as error:  # an error of triton's own code generation, with the kernel's own line
            _fail(record, "ast-to-ttir", [diagnostic(*function_line(src.fn), f"{type(error).__name__}: {error}",
                                                     stage="ast-to-ttir", kernel=name)])
        record["stages"].append("ast-to-ttir")
        for stage, run in stages.items():
            if stage == BINARY_STAGE:
                record["stopped_before"] = stage
                return
            try:
                with captured_stderr() as err:
                    module = run(module, metadata)
            except subprocess.CalledProcessError as error:
                text = (error.stderr or b"").decode(errors="replace")
                _fail(record, stage, mlir_diagnostics(text, stage, name, src.fn))
            except Exception as error:
                text = err.text + f"\n{type(error).__name__}: {error}"
                _fail(record, stage, mlir_diagnostics(text, stage, name, src.fn))
            record["stages"].append(stage)
            record["ir_chars"] = len(str(module))  # the last stage's output (ttadapter: linalg/HIVM IR as text)


def _fail(record: dict[str, Any], stage: str, errors: list[dict[str, Any]]) -> None:
    record["failed_stage"], record["errors"] = stage, errors
    raise FrontEndFailure(stage, errors)


def _plain(value: Any) -> Any:
    return value if isinstance(value, (int, float, bool, str)) or value is None else str(value)


class captured_stderr:
    """File descriptor 2 into a temporary file while a stage runs (MLIR prints its diagnostics there)."""

    def __enter__(self) -> captured_stderr:
        self.text = ""  # what was printed, once the block has ended
        self.file = tempfile.TemporaryFile()
        sys.stderr.flush()
        self.saved = os.dup(2)
        os.dup2(self.file.fileno(), 2)
        return self

    def read(self) -> str:
        sys.stderr.flush()
        self.file.seek(0)
        return self.file.read().decode(errors="replace")[-20000:]

    def __exit__(self, *exc: object) -> None:
        sys.stderr.flush()
        os.dup2(self.saved, 2)
        os.close(self.saved)
        self.text = self.read()
        self.file.close()
        if self.text.strip():
            sys.stderr.write(self.text)


def function_line(fn: Any) -> tuple[int, int]:
    """The line and column (1-based) of a @triton.jit function's `def` in kernel.py."""
    import inspect

    try:
        lines, start = inspect.getsourcelines(fn.fn)
    except (OSError, TypeError):
        return 0, 0
    for offset, text in enumerate(lines):
        if text.lstrip().startswith("def "):
            return start + offset, len(text) - len(text.lstrip()) + 1
    return start, 1


def triton_error(error: CompilationError, fn: Any) -> dict[str, Any]:
    """Triton's front-end error at its line in kernel.py. An error inside a @triton.jit function the kernel
    calls comes wrapped in one at each call site: the innermost is located, the call sites are named."""
    chain = [error]
    while isinstance(chain[-1].__cause__, CompilationError):
        chain.append(chain[-1].__cause__)
    places = [(_owner(e, fn), *_located(e, _owner(e, fn))) for e in chain]
    owner, line, column = places[-1]
    message = _readable(chain[-1].error_message) or str(chain[-1]).strip().splitlines()[-1]
    message += f" (in @triton.jit {owner.__name__}"
    calls = [f"{o.__name__} at kernel.py:{n}" for o, n, _ in places[:-1] if n]
    message += f"; called from {', '.join(reversed(calls))})" if calls else ")"
    return diagnostic(line, column, message, stage="ast-to-ttir", kernel=fn.__name__)


def _owner(error: CompilationError, fn: Any) -> Any:
    """The @triton.jit function whose source the error carries (the launched kernel when none matches)."""
    return next((candidate for candidate in _jit_functions() if candidate.src == error.src), fn)


def _located(error: CompilationError, owner: Any) -> tuple[int, int]:
    """The error's node, located within `owner`'s source, as a line and column (1-based) of kernel.py."""
    def_line, def_column = function_line(owner)
    if not def_line:
        return 0, 0
    node = error.node
    return def_line + getattr(node, "lineno", 1) - 1, def_column + getattr(node, "col_offset", 0)


def _readable(text: str | None) -> str:
    """`NameError('x is not defined')` (how triton words the error it wraps) as `NameError: x is not defined`."""
    import ast

    match = re.fullmatch(r"(\w+)\((.*)\)", (text or "").strip(), re.DOTALL)
    if match:
        try:
            value = ast.literal_eval(match.group(2))
        except (ValueError, SyntaxError):
            return (text or "").strip()
        if isinstance(value, str):
            return f"{match.group(1)}: {value}"
    return (text or "").strip()


def _jit_functions() -> list[Any]:
    module = sys.modules.get("ks_candidate")
    found = [value for value in vars(module).values() if isinstance(value, JITFunction)] if module else []
    for value in list(vars(module).values()) if module else []:  # autotuned or heuristics-wrapped kernels
        inner = getattr(value, "fn", None)
        while inner is not None and not isinstance(inner, JITFunction):
            inner = getattr(inner, "fn", None)
        if inner is not None and inner not in found:
            found.append(inner)
    return found


def mlir_diagnostics(text: str, stage: str, kernel: str, fn: Any) -> list[dict[str, Any]]:
    """The diagnostics an MLIR tool printed with locations in kernel.py; the whole text at the kernel's `def`
    when none is located there."""
    found = []
    for raw in text.splitlines():
        match = MLIR_DIAGNOSTIC.search(raw)
        if match and match.group(3) == "error":
            found.append(diagnostic(int(match.group(1)), int(match.group(2)), match.group(4), stage=stage,
                                    kernel=kernel))
    if found:
        return found[:MAX_ERRORS]
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return [diagnostic(*function_line(fn), "\n".join(lines[-15:]) or f"{stage} failed", stage=stage, kernel=kernel)]


def autotuned_run(self: Autotuner, *args: Any, **kwargs: Any) -> Any:
    """Autotune without timing: every (pruned) configuration compiled and recorded, the first one's result."""
    bound = dict(zip(self.arg_names, args, strict=False))
    configs = self.prune_configs({**bound, **kwargs}) if hasattr(self, "prune_configs") else self.configs
    result = None
    for index, config in enumerate(configs or [None]):
        extra = dict(config.all_kwargs()) if config is not None else {}
        if config is not None and config.pre_hook:
            config.pre_hook({**bound, **extra})
        outcome = self.fn.run(*args, **{**kwargs, **extra})
        result = outcome if index == 0 else result
    return result


def host_error(stage: str) -> dict[str, Any]:
    """A Python exception in the candidate's own code: its innermost line in kernel.py, and the exception."""
    kind, error, tb = sys.exc_info()
    line = 0
    for frame, number in traceback.walk_tb(tb):
        if frame.f_code.co_filename == KERNEL_FILE:
            line = number
    text = "".join(traceback.format_exception_only(kind, error)).strip()
    return diagnostic(line, 1 if line else 0, text, stage=stage, kernel="")


def meta(place: dict[str, Any]) -> torch.Tensor:
    return torch.empty(tuple(place["shape"]), dtype=getattr(torch, place["dtype"]), device="meta")


def run_cases(frontend: FrontEnd, kernel: Any, cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    errors: list[dict[str, Any]] = []
    for case in cases:
        frontend.case = case["name"]
        before = len(frontend.kernels)
        launched = sum(k["launches"] for k in frontend.kernels)
        refusals = Refusals()
        try:
            with compute_guard(refusals):
                kernel([meta(p) for p in case["inputs"]], [meta(p) for p in case["outputs"]], dict(case["attrs"]))
        except FrontEndFailure as failure:
            errors += failure.diagnostics
            break
        except BaseException:
            errors.append(host_error("launch"))
            break
        if refusals.names:
            errors.append(diagnostic(0, 0, f"forbidden: ks_kernel computed with torch ({refusals.names[0]}): compute "
                                           "in @triton.jit kernels", stage="launch", kernel=""))
            break
        if len(frontend.kernels) == before and sum(k["launches"] for k in frontend.kernels) == launched:
            errors.append(diagnostic(0, 0, f"ks_kernel launched no @triton.jit kernel in case {case['name']!r}",
                                     stage="launch", kernel=""))
            break
    return errors


def main(argv: list[str]) -> None:
    report_fd = int(argv[0])
    warnings.simplefilter("ignore")
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # the candidate's prints go to the log, never into the report
    report = os.fdopen(report_fd, "w", encoding="utf-8")
    with open(CASES_FILE, encoding="utf-8") as handle:
        cases = json.load(handle)
    frontend = FrontEnd()
    driver.set_active(StandInDriver())
    triton.compiler.compile = frontend.compile  # what JITFunction's launch path calls (looked up at its first run)
    Autotuner.run = autotuned_run
    try:
        install_syscall_filter("npu")  # fork and exec allowed: the adapter stage runs triton-adapter-opt
    except OSError as error:  # never run the candidate without it
        sys.stderr.write(f"kernelsage front end: {error}\n")
        sys.exit(70)
    errors: list[dict[str, Any]] = []
    try:
        kernel = load_candidate(KERNEL_FILE)
    except BaseException:
        errors.append(host_error("load"))
    else:
        errors = run_cases(frontend, kernel, cases)
    result = {"triton": triton.__version__, "arch": ARCH, "binary_tool": frontend.tool, "errors": errors[:MAX_ERRORS],
              "kernels": [{k: v for k, v in record.items() if k != "errors"} for record in frontend.kernels]}
    report.write(json.dumps(result, default=str) + "\n")
    report.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
