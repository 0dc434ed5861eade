"""The cpu backend: C++17 + OpenMP candidates against the kernelsage C ABI, built with the system compiler."""

from __future__ import annotations

import dataclasses
import os
import secrets
import shutil
import time
from pathlib import Path
from typing import Any

from kernelsage.errors import BackendError
from kernelsage.tasks.model import Task
from kernelsage.tools.cpu import build
from kernelsage.tools.cpu.abi import HEADER
from kernelsage.tools.diagnostics import parse_compiler_output
from kernelsage.tools.results import (
    Artifact,
    Candidate,
    CaseResult,
    CompileResult,
    CompilerMessage,
    ProfileResult,
    Status,
    Timing,
    VerifyResult,
)
from kernelsage.tools.safeguards import scan_candidate
from kernelsage.tools.sandbox import ChildOutcome, Limits, Sandbox, classify_crash
from kernelsage.tools.timing import DEFAULT_REPS, DEFAULT_WARMUP

JOBS = "kernelsage.tools.cpu.jobs"
# Results worth caching: they depend on the source alone, not on the machine's load.
CACHEABLE = (Status.OK, Status.COMPILE_ERROR)


def default_threads() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


class CpuBackend:
    """compile / verify / profile of CPU candidates, each step in a sandboxed child of one warm worker.

    The reference runs on CPU torch with `torch.set_num_threads(threads)`, and the kernel sees
    OMP_NUM_THREADS=threads, so both sides get the same cores.
    """

    name = "cpu"
    candidate_files = ("kernel.cpp",)

    def __init__(
        self, *, threads: int | None = None, compiler: str = "g++", flags: tuple[str, ...] = build.DEFAULT_FLAGS,
        cache_dir: str | Path | None = None, trials: int = 3, warmup: int = DEFAULT_WARMUP,
        reps: int = DEFAULT_REPS, compile_limits: Limits | None = None, run_limits: Limits | None = None,
    ) -> None:
        self.threads = threads or default_threads()
        self.compiler = compiler
        self.flags = tuple(flags)
        self.cache_dir = Path(cache_dir) if cache_dir else build.cache_root()
        self.trials = trials
        self.warmup = warmup
        self.reps = reps
        self.compile_limits = compile_limits or Limits(wall_s=60, cpu_s=60)
        self.run_limits = run_limits or Limits(wall_s=60, cpu_s=120)
        self._sandbox = Sandbox(threads=self.threads, preload=(JOBS,))

    def close(self) -> None:
        self._sandbox.close()

    def __enter__(self) -> CpuBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # compile ---------------------------------------------------------------------------------------------

    def compile(self, candidate: Candidate) -> CompileResult:
        """Safeguard scan, then a cached or fresh sandboxed build of the candidate's one C++ file."""
        problem = build.check_file_names(candidate.files)
        if problem:
            return CompileResult(ok=False, status=Status.COMPILE_ERROR, log=problem,
                                 errors=[CompilerMessage(file="", line=0, column=0, severity="error",
                                                         message=problem)])
        violations = scan_candidate(candidate.files)
        if violations:
            return CompileResult(
                ok=False, status=Status.FORBIDDEN, reason="; ".join(v.describe() for v in violations[:5]),
                errors=[CompilerMessage(file=v.file, line=v.line, column=0, severity="error",
                                        message=f"forbidden: {v.reason}") for v in violations],
            )
        key = build.cache_key(candidate.files, self.flags, self.compiler)
        cached = self._cached(key)
        if cached is not None:
            return cached
        return self._build(candidate, key)

    def _entry(self, key: str) -> Path:
        return self.cache_dir / key

    def _cached(self, key: str) -> CompileResult | None:
        record = self._entry(key) / "result.json"
        if not record.is_file():
            return None
        try:
            result = CompileResult.model_validate_json(record.read_text())
        except ValueError:
            return None
        if result.artifact is not None and not Path(result.artifact.path).is_file():
            return None
        return result.model_copy(update={"cached": True, "seconds": 0.0})

    def _build(self, candidate: Candidate, key: str) -> CompileResult:
        workdir = self._sandbox.workdir()
        try:
            for name, text in candidate.files.items():
                (workdir / name).write_text(text)
            shutil.copyfile(HEADER, workdir / HEADER.name)
            source = next(name for name in candidate.files if name.endswith(build.SOURCE_SUFFIXES))
            command = build.compile_command(self.compiler, self.flags, source)
            outcome = self._sandbox.run(f"{JOBS}:build", {"command": command}, self.compile_limits, workdir)
            data = outcome.result()
            if data is None:
                status, message = classify_crash(outcome, self.compile_limits)
                return CompileResult(ok=False, status=status, log=f"{message}\n{outcome.stderr_tail}".strip(),
                                     seconds=outcome.wall_s)
            log = data["log"]
            ok = data["returncode"] == 0 and (workdir / build.LIBRARY_NAME).is_file()
            artifact = self._store(workdir / build.LIBRARY_NAME, key) if ok else None
            result = CompileResult(ok=ok, status=Status.OK if ok else Status.COMPILE_ERROR, log=log,
                                   errors=parse_compiler_output(log), seconds=data["seconds"], artifact=artifact)
            self._remember(key, result)
            return result
        finally:
            self._sandbox.discard(workdir)

    def _store(self, library: Path, key: str) -> Artifact:
        entry = self._entry(key)
        entry.mkdir(parents=True, exist_ok=True)
        target = entry / build.LIBRARY_NAME
        partial = entry / f".{build.LIBRARY_NAME}.{os.getpid()}.partial"
        shutil.copyfile(library, partial)
        os.replace(partial, target)  # atomic: a concurrent reader sees the old file or the new one
        return Artifact(backend=self.name, path=str(target), key=key)

    def _remember(self, key: str, result: CompileResult) -> None:
        if result.status not in CACHEABLE:
            return
        entry = self._entry(key)
        entry.mkdir(parents=True, exist_ok=True)
        partial = entry / f".result.{os.getpid()}.partial"
        partial.write_text(result.model_dump_json())
        os.replace(partial, entry / "result.json")

    # verify and profile ----------------------------------------------------------------------------------

    def _task_payload(self, artifact: Artifact, task: Task) -> dict[str, Any]:
        if artifact.backend != self.name:
            raise BackendError(f"artifact was built by the {artifact.backend!r} backend, not {self.name!r}")
        if not Path(artifact.path).is_file():
            raise BackendError(f"artifact {artifact.path} is missing; compile the candidate again")
        if task.origin is None:
            raise BackendError(f"task {task.id!r} was not loaded from a suite; load it with "
                               "kernelsage.tasks.loaders.load_suite so the sandbox can load it too")
        return {"library": artifact.path, "threads": self.threads,
                "task": {"id": task.id, "origin": dataclasses.asdict(task.origin)}}

    def _run(self, handler: str, payload: dict[str, Any]) -> ChildOutcome:
        workdir = self._sandbox.workdir()
        try:
            return self._sandbox.run(f"{JOBS}:{handler}", payload, self.run_limits, workdir)
        finally:
            self._sandbox.discard(workdir)

    def verify(self, artifact: Artifact, task: Task, *, trials: int | None = None,
               seed: int | None = None) -> VerifyResult:
        """All test cases, `trials` rounds of fresh random inputs, compared per METHOD §8."""
        seed = secrets.randbits(31) if seed is None else seed
        trials = trials or self.trials
        payload = {**self._task_payload(artifact, task), "trials": trials, "seed": seed}
        started = time.perf_counter()
        outcome = self._run("verify", payload)
        seconds = time.perf_counter() - started
        cases = [CaseResult.model_validate(e["data"]) for e in outcome.events if e.get("kind") == "case"]
        if outcome.result() is None:
            status, message = classify_crash(outcome, self.run_limits)
            progress = outcome.last("progress")
            where = f" in case {progress['case']!r} (trial {progress['trial']})" if progress else ""
            if progress:
                cases.append(CaseResult(case=progress["case"], trial=progress["trial"], passed=False,
                                        status=status, message=message))
            # The first failing case names the class (a crash after a wrong case is reported in the message).
            first = next((case.status for case in cases if not case.passed), status)
            return VerifyResult(status=first, correct=False, cases=cases, trials=trials, seed=seed,
                                seconds=seconds, message=message + where, stderr_tail=outcome.stderr_tail)
        failure = next((case for case in cases if not case.passed), None)
        status = failure.status if failure else Status.OK
        message = "" if failure is None else (failure.message or f"{failure.n_mismatch} of {failure.n_elements} "
                                              f"elements wrong in case {failure.case!r} (trial {failure.trial})")
        return VerifyResult(status=status, correct=failure is None, cases=cases, trials=trials, seed=seed,
                            seconds=seconds, message=message, stderr_tail=outcome.stderr_tail if failure else "")

    def profile(self, artifact: Artifact, task: Task, *, warmup: int | None = None,
                reps: int | None = None) -> ProfileResult:
        """Latency of the candidate and the reference on the performance case, by the same timing function."""
        payload = {**self._task_payload(artifact, task), "seed": secrets.randbits(31),
                   "warmup": self.warmup if warmup is None else warmup, "reps": reps or self.reps}
        started = time.perf_counter()
        outcome = self._run("profile", payload)
        seconds = time.perf_counter() - started
        data = outcome.result()
        if data is None:
            status, message = classify_crash(outcome, self.run_limits)
            return ProfileResult(status=status, ok=False, case=task.perf_case.name, threads=self.threads,
                                 seconds=seconds, message=message, stderr_tail=outcome.stderr_tail)
        if data["status"] != "ok":
            return ProfileResult(status=Status(data["status"]), ok=False, case=task.perf_case.name,
                                 threads=self.threads, seconds=seconds, message=data.get("message", ""))
        candidate, reference = Timing(**data["candidate"]), Timing(**data["reference"])
        return ProfileResult(
            status=Status.OK, ok=True, case=data["case"], candidate=candidate, reference=reference,
            speedup=reference.mean / candidate.mean if candidate.mean > 0 else 0.0,
            output_correct=data["output_correct"], threads=self.threads, seconds=seconds,
            message="" if data["output_correct"] else "the output on the performance case does not match the "
                                                       "reference",
        )

