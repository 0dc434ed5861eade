"""The cpu backend: C++17 + OpenMP candidates against the kernelsage C ABI, built with the system compiler.

Every candidate is treated as adversarial (docs/security.md). Compiling and running happen in bubblewrap
sandboxes (`kernelsage.tools.isolation`); the built library's links are checked against an allowlist; the
build cache is content-addressed and verified; verify and profile are decided by a trusted judge that never
loads candidate code, while an isolated runner under seccomp makes the calls.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from pathlib import Path
from typing import Any

from kernelsage.errors import BackendError
from kernelsage.tasks.model import Task
from kernelsage.tools.cpu import build
from kernelsage.tools.cpu.abi import HEADER
from kernelsage.tools.cpu.binaries import build_runner
from kernelsage.tools.cpu.cache import BuildCache
from kernelsage.tools.cpu.jobs import read_library
from kernelsage.tools.diagnostics import parse_compiler_output
from kernelsage.tools.isolated_backend import IsolatedBackend, job_key
from kernelsage.tools.isolation import Isolation, give_to_sandbox
from kernelsage.tools.judging.contents import DEFAULT_SETS
from kernelsage.tools.judging.resources import (
    MEMORY_LIMIT_ENV,
    TIME_LIMIT_ENV,
    cache_root,
    default_threads,
    run_limits_for,
)
from kernelsage.tools.redaction import redact
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


def _env_number(name: str, kind: type[int] | type[float]) -> Any:
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        return kind(text)
    except ValueError:
        raise BackendError(f"{name}={text!r}: expected a number") from None


class CpuBackend(IsolatedBackend):
    """compile / verify / profile of CPU candidates, each step in a job of one warm sandbox worker.

    The reference runs on CPU torch with `torch.set_num_threads(threads)`, and the kernel sees
    OMP_NUM_THREADS=threads, so both sides get the same cores. `unsafe_no_isolation=True` (or
    KERNELSAGE_UNSAFE_NO_ISOLATION=1) lets candidates run where bubblewrap is not available, with a warning;
    without it such a machine refuses them (IsolationUnavailableError).

    `memory_limit_mb` and `time_limit_s` (default: KERNELSAGE_CPU_MEMORY_MB, KERNELSAGE_CPU_TIME_LIMIT_S) set
    the verify and profile jobs' limits (`run_limits_for`) unless `run_limits` is given whole.
    """

    name = "cpu"
    candidate_files: tuple[str, ...] = ("kernel.cpp",)

    def __init__(
        self, *, threads: int | None = None, compiler: str = "g++", flags: tuple[str, ...] = build.DEFAULT_FLAGS,
        cache_dir: str | Path | None = None, trials: int = 3, warmup: int = DEFAULT_WARMUP,
        reps: int = DEFAULT_REPS, compile_limits: Limits | None = None, run_limits: Limits | None = None,
        profile_sets: int = DEFAULT_SETS, unsafe_no_isolation: bool = False, isolation: Isolation | None = None,
        memory_limit_mb: int | None = None, time_limit_s: float | None = None,
    ) -> None:
        self.threads = threads or default_threads()
        self.compiler = compiler
        self.flags = tuple(flags)
        self.cache_dir = Path(cache_dir) if cache_dir else cache_root()
        self.trials = trials
        self.warmup = warmup
        self.reps = reps
        self.profile_sets = profile_sets
        self.compile_limits = compile_limits or Limits(wall_s=60, cpu_s=60)
        self.run_limits = run_limits or run_limits_for(
            memory_limit_mb if memory_limit_mb is not None else _env_number(MEMORY_LIMIT_ENV, int),
            time_limit_s if time_limit_s is not None else _env_number(TIME_LIMIT_ENV, float))
        self._init_isolation(unsafe_no_isolation, isolation)
        self._cache = BuildCache(self.cache_dir, self.name)
        self._runner: tuple[Path, str] | None = None
        self._sandbox = Sandbox(threads=self.threads, preload=(JOBS,))

    def close(self) -> None:
        self._sandbox.close()

    # compile ---------------------------------------------------------------------------------------------

    def compile(self, candidate: Candidate, *, task: Task | None = None) -> CompileResult:
        """Safeguard scan, then a verified cached build or a fresh isolated one, then the link check (every
        task's candidate is the one C ABI file: `task` is not needed)."""
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
        isolation = self.isolation
        key = build.cache_key(candidate.files, self.flags, self.compiler)
        cached = self._cache.lookup(key)
        if cached is not None:
            return cached
        return self._build(candidate, key, isolation)

    def _build(self, candidate: Candidate, key: str, isolation: Isolation) -> CompileResult:
        workdir = self._sandbox.workdir()
        try:
            build_dir = workdir / "build"
            build_dir.mkdir()
            for name, text in candidate.files.items():
                (build_dir / name).write_text(text)
            shutil.copyfile(HEADER, build_dir / HEADER.name)
            give_to_sandbox(build_dir, isolation, within=self._sandbox.root)
            source = next(name for name in candidate.files if name.endswith(build.SOURCE_SUFFIXES))
            payload = {"command": build.compile_command(self.compiler, self.flags, source),
                       "isolation": dataclasses.asdict(isolation), "limits": dataclasses.asdict(self.compile_limits)}
            outcome = self._sandbox.run(f"{JOBS}:build", payload, self._limits(self.compile_limits), workdir)
            return self._built(outcome, key, build_dir)
        finally:
            self._sandbox.discard(workdir)

    def _built(self, outcome: ChildOutcome, key: str, build_dir: Path) -> CompileResult:
        data = outcome.result()
        if data is None or data.get("timeout"):
            status, message = (Status.TIMEOUT, f"the compiler was killed after {self.compile_limits.wall_s:g} s") \
                if data else classify_crash(outcome, self.compile_limits)
            return CompileResult(ok=False, status=status, log=redact(f"{message}\n{outcome.stderr_tail}".strip()),
                                 seconds=outcome.wall_s)
        log = redact(data["log"])
        if data["returncode"] != 0:
            result = CompileResult(ok=False, status=Status.COMPILE_ERROR, log=log, errors=parse_compiler_output(log),
                                   seconds=data["seconds"])
        elif data.get("inspect_error"):
            return CompileResult(ok=False, status=Status.HARNESS_ERROR, log=redact(data["inspect_error"]),
                                 seconds=data["seconds"])
        elif data.get("forbidden"):
            reasons = [f"{name}: {why}" for name, why in data["forbidden"]]
            result = CompileResult(
                ok=False, status=Status.FORBIDDEN, log=log, seconds=data["seconds"],
                reason="the library links against forbidden symbols: " + "; ".join(reasons[:8]),
                errors=[CompilerMessage(file="", line=0, column=0, severity="error",
                                        message=f"forbidden symbol {reason}") for reason in reasons])
        else:
            library = read_library(build_dir / build.LIBRARY_NAME)
            artifact = self._cache.store(key, library)
            if artifact.sha256 != data["sha256"]:
                return CompileResult(ok=False, status=Status.HARNESS_ERROR, seconds=data["seconds"],
                                     log="the library changed between its check and its storing; compile again")
            result = CompileResult(ok=True, status=Status.OK, log=log, errors=parse_compiler_output(log),
                                   seconds=data["seconds"], artifact=artifact)
        self._cache.remember(key, result)
        return result

    # verify and profile ----------------------------------------------------------------------------------

    def _job_payload(self, artifact: Artifact, task: Task) -> dict[str, Any]:
        job_task = self._job_task(artifact, task)
        isolation = self.isolation
        if self._runner is None:
            self._runner = build_runner(self.cache_dir)
        runner, runner_sha256 = self._runner
        return {"library": artifact.path, "library_sha256": artifact.sha256, "runner": str(runner),
                "runner_sha256": runner_sha256, "threads": self.threads,
                "isolation": dataclasses.asdict(isolation), "limits": dataclasses.asdict(self.run_limits),
                "task": job_task}

    def _run(self, handler: str, payload: dict[str, Any]) -> ChildOutcome:
        return self._run_job(f"{JOBS}:{handler}", payload, self.run_limits)

    def verify(self, artifact: Artifact, task: Task, *, trials: int | None = None,
               seed: int | None = None) -> VerifyResult:
        """All test cases, `trials` rounds of fresh random inputs, compared per METHOD §8."""
        seed = job_key() if seed is None else seed
        trials = trials or self.trials
        payload = {**self._job_payload(artifact, task), "trials": trials, "seed": seed}
        started = time.perf_counter()
        outcome = self._run("verify", payload)
        seconds = time.perf_counter() - started
        cases = [CaseResult.model_validate(e["data"]) for e in outcome.events if e.get("kind") == "case"]
        data = outcome.result()
        if data is None:
            status, message = classify_crash(outcome, self.run_limits)
            progress = outcome.last("progress")
            where = f" in case {progress['case']!r} (trial {progress['trial']})" if progress else ""
            return VerifyResult(status=status, correct=False, cases=cases, trials=trials, seed=seed,
                                seconds=seconds, message=redact(message + where),
                                stderr_tail=redact(outcome.stderr_tail))
        failure = next((case for case in cases if not case.passed), None)
        status = failure.status if failure else Status.OK
        message = "" if failure is None else (failure.message or f"{failure.n_mismatch} of {failure.n_elements} "
                                              f"elements wrong in case {failure.case!r} (trial {failure.trial})")
        return VerifyResult(status=status, correct=failure is None, cases=cases, trials=trials, seed=seed,
                            seconds=seconds, message=redact(message),
                            stderr_tail=redact(data.get("stderr_tail", "")) if failure else "")

    def profile(self, artifact: Artifact, task: Task, *, warmup: int | None = None,
                reps: int | None = None) -> ProfileResult:
        """Candidate and reference timed interleaved by the judge on rotating input sets, every output checked."""
        payload = {**self._job_payload(artifact, task), "seed": job_key(), "sets": self.profile_sets,
                   "warmup": self.warmup if warmup is None else warmup, "reps": reps or self.reps}
        started = time.perf_counter()
        outcome = self._run("profile", payload)
        seconds = time.perf_counter() - started
        data = outcome.result()
        common = {"case": task.perf_case.name, "threads": self.threads, "seconds": seconds}
        if data is None:
            status, message = classify_crash(outcome, self.run_limits)
            return ProfileResult(status=status, ok=False, message=redact(message),
                                 stderr_tail=redact(outcome.stderr_tail), **common)
        if data["status"] != "ok":
            return ProfileResult(status=Status(data["status"]), ok=False, message=redact(data.get("message", "")),
                                 stderr_tail=redact(data.get("stderr_tail", "")), **common)
        candidate, reference = Timing(**data["candidate"]), Timing(**data["reference"])
        return ProfileResult(
            status=Status.OK, ok=True, candidate=candidate, reference=reference,
            speedup=reference.mean / candidate.mean if candidate.mean > 0 else 0.0,
            output_correct=bool(data["output_correct"]), input_sets=int(data["input_sets"]),
            round_trip_s=float(data["round_trip_s"]), fresh_inputs=bool(data.get("fresh_inputs")),
            unseen_calls=int(data.get("unseen_calls", 0)), contents=str(data.get("contents", "")),
            **{**common, "case": data["case"]},
        )
