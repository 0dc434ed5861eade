"""Building Ascend candidates: layout and safeguard checks, the build plan of the candidate's route run as a
job of a build worker (each step isolated, `jobs.build`), the diagnostics parsed, the output cached.

Each build has its own directory and each build worker runs one build at a time, so builds of different
candidates run side by side (as many as there are workers).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import queue
import shutil
import subprocess
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kernelsage.errors import BackendError
from kernelsage.tasks.model import Task
from kernelsage.tools.ascend import commands
from kernelsage.tools.ascend.candidate import (
    DIRECT,
    LayoutError,
    OpSignature,
    classify_layout,
    parse_op_signature,
)
from kernelsage.tools.ascend.diagnostics import parse_build_log
from kernelsage.tools.ascend.glue import (
    DIRECT_GLUE,
    HEADER,
    MODULE_FILE,
    PACKAGE,
    TUNING_MACROS,
    HostHeaders,
    msopgen_glue_source,
)
from kernelsage.tools.ascend.safeguards import scan_ascend
from kernelsage.tools.ascend.sandboxing import read_only_paths
from kernelsage.tools.ascend.store import AscendCache
from kernelsage.tools.ascend.suite_build import SuiteBuild, suite_build
from kernelsage.tools.ascend.suite_task import GLUE_HELPER
from kernelsage.tools.ascend.toolchain import Toolchain
from kernelsage.tools.isolation import Isolation, give_to_sandbox
from kernelsage.tools.redaction import redact
from kernelsage.tools.results import Candidate, CompileResult, CompilerMessage, Status
from kernelsage.tools.safeguards import scan_candidate
from kernelsage.tools.sandbox import ChildOutcome, Limits, Sandbox, classify_crash

JOBS = "kernelsage.tools.ascend.jobs"


def compile_error(message: str, **extra: Any) -> CompileResult:
    """A compile failure with one error that is not tied to a line (a bad layout, no module)."""
    return CompileResult(ok=False, status=Status.COMPILE_ERROR, log=message, errors=[
        CompilerMessage(file="", line=0, column=0, severity="error", message=message)], **extra)


class AscendBuilder:
    """Builds candidates for one toolchain, SoC and set of torch headers into a verified cache."""

    def __init__(self, *, toolchain: Toolchain, headers: HostHeaders, soc: str, arch: str, cache: AscendCache,
                 limits: Limits, workers: int, platform: str) -> None:
        self.toolchain, self.headers, self.soc, self.arch = toolchain, headers, soc, arch
        self.cache, self.limits, self.platform = cache, limits, platform
        self._glue_lock = threading.Lock()
        self._sandboxes: queue.Queue[Sandbox] = queue.Queue()
        for _ in range(max(workers, 1)):
            self._sandboxes.put(Sandbox(threads=1, preload=(JOBS,)))

    def close(self) -> None:
        while not self._sandboxes.empty():
            self._sandboxes.get_nowait().close()

    @contextmanager
    def _sandbox(self) -> Iterator[Sandbox]:
        sandbox = self._sandboxes.get()
        try:
            yield sandbox
        finally:
            self._sandboxes.put(sandbox)

    def cache_key(self, files: dict[str, str]) -> str:
        layout = self.toolchain.layout
        material = json.dumps({"files": sorted(files.items()), "toolchain": self.toolchain.describe(),
                               "layout": dataclasses.asdict(layout) if layout else None,
                               "arch": self.arch, "soc": self.soc, "header": HEADER.read_text(),
                               "tuning_macros": TUNING_MACROS.read_text(),
                               "glue": DIRECT_GLUE.read_text(), "helper": (PACKAGE / GLUE_HELPER).read_text(),
                               "headers": dataclasses.asdict(self.headers)})
        return hashlib.sha256(material.encode()).hexdigest()[:32]

    def compile(self, candidate: Candidate, isolation: Isolation, mirrored: Sequence[tuple[str, str]] = (),
                task: Task | None = None, mode: str = "") -> CompileResult:
        """Layout and safeguard checks, then a verified cached build or a fresh isolated one (`mirrored`: the
        Python environment's parts the sandbox's user cannot reach, as mirrors: `python_mirror`). With the
        `task`, a task that brings its own glue (NPUKernelBench) is built through it, in its suite's template
        mode (`mode` overrides it: kernel_only | full)."""
        try:
            suite = suite_build(candidate.files, task, mode) if task is not None else None
            files = suite.files if suite else candidate.files
            layout = classify_layout(files)
            signature = None if layout.route == DIRECT else parse_op_signature(
                files[f"op_host/{layout.op}.cpp"], layout.op)
        except LayoutError as exc:
            return compile_error(str(exc))
        violations = scan_candidate(candidate.files) + scan_ascend(candidate.files)
        if violations:
            return CompileResult(
                ok=False, status=Status.FORBIDDEN, reason="; ".join(v.describe() for v in violations[:5]),
                errors=[CompilerMessage(file=v.file, line=v.line, column=0, severity="error",
                                        message=f"forbidden: {v.reason}") for v in violations])
        key = self.cache_key({**files, **({commands.SUITE_GLUE: suite.glue} if suite else {})})
        cached = self.cache.lookup(key)
        if cached is not None:
            return cached
        with self._sandbox() as sandbox:
            workdir = sandbox.workdir()
            try:
                build_dir = workdir / "build"
                build_dir.mkdir()
                if layout.route == DIRECT:
                    steps = commands.direct_plan(self.toolchain, self.arch, self.headers)
                    self._place_direct(candidate.files, build_dir)
                else:
                    assert signature is not None
                    steps = commands.msopgen_plan(self.toolchain, self.soc, self.headers)
                    self._place_msopgen(files, build_dir, signature, suite)
                give_to_sandbox(build_dir, isolation, within=sandbox.root)  # the sources stay read-only to it
                payload = {"steps": [[s.name, list(s.argv)] for s in steps], "env": dict(self.toolchain.environment),
                           "read_only": read_only_paths(self.toolchain.ascend_home,
                                                        other_user=isolation.user is not None),
                           "mirrored": [list(pair) for pair in mirrored],
                           "isolation": dataclasses.asdict(isolation),
                           "limits": dataclasses.asdict(self.limits)}
                limits = dataclasses.replace(self.limits, isolate_network=not isolation.available)
                outcome = sandbox.run(f"{JOBS}:build", payload, limits, workdir)
                return self._built(outcome, key, build_dir, signature, suite)
            finally:
                sandbox.discard(workdir)

    def _place_direct(self, files: dict[str, str], build_dir: Path) -> None:
        for name, text in files.items():
            (build_dir / name).write_text(text)
        shutil.copyfile(HEADER, build_dir / HEADER.name)
        shutil.copyfile(TUNING_MACROS, build_dir / TUNING_MACROS.name)
        shutil.copyfile(self.direct_glue_object(), build_dir / commands.DIRECT_GLUE_OBJECT)

    def _place_msopgen(self, files: dict[str, str], build_dir: Path, signature: OpSignature,
                       suite: SuiteBuild | None) -> None:
        for name, text in files.items():
            path = build_dir / commands.CANDIDATE_DIR / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        # beside op_host's sources, it travels with them into the project (a quoted include finds it there)
        shutil.copyfile(TUNING_MACROS, build_dir / commands.CANDIDATE_DIR / "op_host" / TUNING_MACROS.name)
        # The description only shapes msopgen's skeleton: the candidate's OpDef replaces it, types included.
        (build_dir / commands.OPGEN_SPEC).write_text(commands.opgen_spec(signature, ["float32", "float16"]))
        if suite is None:
            (build_dir / commands.OPGEN_GLUE_SOURCE).write_text(msopgen_glue_source(signature))
            return
        (build_dir / commands.OPGEN_GLUE_SOURCE).write_text(suite.glue)
        shutil.copyfile(PACKAGE / GLUE_HELPER, build_dir / GLUE_HELPER)

    def direct_glue_object(self) -> Path:
        """The direct route's glue object, compiled once per toolchain and torch (kernelsage's own source, so
        it is compiled outside the sandbox) and kept in the cache."""
        step = commands.direct_glue_step(self.toolchain, self.headers, str(DIRECT_GLUE), "glue.o")
        key = hashlib.sha256(json.dumps([list(step.argv), DIRECT_GLUE.read_text(), HEADER.read_text(),
                                         self.toolchain.describe()]).encode()).hexdigest()[:32]
        target = self.cache.root / "glue" / f"{key}.o"
        with self._glue_lock:
            if target.is_file():
                return target
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_suffix(f".{os.getpid()}.partial")
            argv = [*step.argv[:-1], str(partial)]
            try:
                completed = subprocess.run(argv, capture_output=True, text=True, errors="replace", check=False,
                                           cwd=target.parent,  # the compiler's stray files stay in the cache
                                           env={**os.environ, **self.toolchain.environment}, timeout=900)
            except subprocess.TimeoutExpired as exc:
                raise BackendError(f"kernelsage's own host glue did not compile with {self.toolchain.host_cxx} "
                                   "within 900 s; is the machine overloaded?") from exc
            if completed.returncode != 0 or not partial.is_file():
                raise BackendError(f"kernelsage's own host glue did not compile with {self.toolchain.host_cxx} "
                                   f"against torch_npu at {self.headers.torch_npu_root}: "
                                   f"{(completed.stderr.strip().splitlines() or ['no output'])[-1]}")
            os.replace(partial, target)
        return target

    def _built(self, outcome: ChildOutcome, key: str, build_dir: Path, signature: OpSignature | None,
               suite: SuiteBuild | None) -> CompileResult:
        data = outcome.result()
        if data is None or data.get("timeout"):
            status, message = (Status.TIMEOUT, f"the build was killed after {self.limits.wall_s:g} s in "
                                               f"its {data.get('failed_step')!r} step") \
                if data else classify_crash(outcome, self.limits)
            return CompileResult(ok=False, status=status, log=redact(f"{message}\n{outcome.stderr_tail}".strip()),
                                 seconds=outcome.wall_s)
        log = redact(f"target: {self.platform}\n{data['log']}")
        seconds = float(data["seconds"])
        if data.get("tool_missing"):
            return CompileResult(ok=False, status=Status.HARNESS_ERROR, seconds=seconds, log=log,
                                 errors=parse_build_log(data["log"]))
        if data["returncode"] != 0:
            errors = parse_build_log(data["log"])
            if not any(e.severity == "error" for e in errors):
                errors.append(CompilerMessage(file="", line=0, column=0, severity="error",
                                              message=f"the {data['failed_step']} step failed with exit code "
                                                      f"{data['returncode']}"))
            result = CompileResult(ok=False, status=Status.COMPILE_ERROR, log=log, errors=errors, seconds=seconds)
        else:
            output = build_dir / "output"
            try:
                output.mkdir()
                os.replace(build_dir / MODULE_FILE, output / MODULE_FILE)
                if signature is not None:  # msopgen: the installed package, and the attribute order of its API
                    os.replace(build_dir / commands.OPGEN_INSTALL, output / commands.OPGEN_INSTALL)
                    (output / commands.OPGEN_ATTRS).write_text(json.dumps([a.name for a in signature.attrs]))
                if suite is not None:  # the module is the task's kernel_gen_ops: the runner calls ModelNew
                    (output / commands.SUITE_GLUE).write_text(json.dumps({"op": suite.op}))
                artifact = self.cache.store(key, output)
            except OSError as exc:
                return compile_error(f"the build produced no usable module: {exc}", seconds=seconds)
            result = CompileResult(ok=True, status=Status.OK, log=log, errors=parse_build_log(data["log"]),
                                   seconds=seconds, artifact=artifact)
        self.cache.remember(key, result)
        return result
