"""The triton backend: one Python file, kernel.py, whose `ks_kernel(inputs, outputs, attrs)` launches
@triton.jit kernels, on `interpret` (the CPU, through TRITON_INTERPRET=1), `cuda`, `npu` or `npu-frontend`
(devices.py).

"Compile" checks the source (source_check.py: imports, names, attributes) and keeps it, hashed, in the
build cache; Triton itself compiles when the runner first launches a kernel, so its errors come back from
verify. On `npu-frontend` (no NPU, no CANN) compile also runs triton-ascend's front end on every launch of
the task's cases (ascend_frontend.py), and its errors are the compile errors; nothing is verified or timed
there. Verify and (on a GPU or NPU) profile are decided by a trusted judge in a job of a warm sandbox worker;
the candidate runs in a sandboxed Python runner it starts (judge.py, runner.py). Interpreted code is never
timed: its profile says so and carries no timing and no speedup, so no speed credit is given.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kernelsage.errors import BackendError
from kernelsage.files import write_atomically
from kernelsage.tasks.model import Task
from kernelsage.tools.isolated_backend import IsolatedBackend, job_key
from kernelsage.tools.isolation import Isolation
from kernelsage.tools.judging.resources import DEFAULT_RUN_LIMITS, cache_root, default_threads
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
from kernelsage.tools.sandbox import Limits, Sandbox, classify_crash
from kernelsage.tools.timing import DEFAULT_REPS, DEFAULT_WARMUP
from kernelsage.tools.triton import ascend_frontend
from kernelsage.tools.triton.devices import COMPILE_ONLY, choose_device, device_status
from kernelsage.tools.triton.source_check import FILE, check_source

JOBS = "kernelsage.tools.triton.jobs"
NOT_RUN = ("not run: the npu-frontend device compiles only (triton-ascend's front end, without CANN or an NPU); "
           "nothing is verified or timed here. Use --device npu on an Ascend host, or interpret for correctness")
UNTIMED = ("not timed: the interpreter (TRITON_INTERPRET=1) checks correctness only. The performance case was not "
           "run and the kernel carries no time and no speedup, so no speed credit is given")


def untimed_profile(task: Task) -> ProfileResult:
    """What a profile on the interpreter says: verified, not timed (no timings, no speedup), no speed credit."""
    return ProfileResult(status=Status.OK, ok=True, case=task.perf_case.name, timed=False, speedup=None,
                         output_correct=True, message=UNTIMED, contents="not timed (interpreter)")


class TritonBackend(IsolatedBackend):
    """compile (a source check), verify and profile of Triton candidates on one device."""

    name = "triton"
    candidate_files: tuple[str, ...] = (FILE,)

    def __init__(self, *, device: str | None = None, threads: int | None = None, cache_dir: str | Path | None = None,
                 trials: int = 3, warmup: int = DEFAULT_WARMUP, reps: int = DEFAULT_REPS,
                 run_limits: Limits | None = None, unsafe_no_isolation: bool = False,
                 isolation: Isolation | None = None, memory_limit_mb: int | None = None,
                 time_limit_s: float | None = None, tasks: Iterable[Task] = ()) -> None:
        from kernelsage.tools.judging.resources import run_limits_for

        self.device = choose_device(device)
        status = device_status(self.device)
        if not status.usable:
            raise BackendError(f"triton device {self.device!r} is not usable here: {status.detail}")
        self.threads = threads or default_threads()
        self.cache_dir = Path(cache_dir) if cache_dir else cache_root()
        self.trials, self.warmup, self.reps = trials, warmup, reps
        self.run_limits = run_limits or (run_limits_for(memory_limit_mb, time_limit_s)
                                         if memory_limit_mb is not None or time_limit_s is not None
                                         else DEFAULT_RUN_LIMITS)
        self._init_isolation(unsafe_no_isolation, isolation)
        self._sandbox = Sandbox(threads=self.threads, preload=(JOBS,))
        self._tasks = {task.id: task for task in tasks}  # what npu-frontend compiles for (else the built-in suite)

    def close(self) -> None:
        self._sandbox.close()

    def compile(self, candidate: Candidate, *, task: Task | None = None) -> CompileResult:
        """The source check, then the source kept in the build cache under its hash; on npu-frontend, the
        front end on `task`'s cases (without it: a task known to the backend or the built-in suite)."""
        started = time.perf_counter()
        source = candidate.files.get(FILE)
        if source is None or len(candidate.files) != 1:
            message = f"a triton candidate is one file, {FILE}; got {', '.join(sorted(candidate.files)) or 'none'}"
            return CompileResult(ok=False, status=Status.COMPILE_ERROR, log=message,
                                 errors=[CompilerMessage(file="", line=0, column=0, severity="error", message=message)])
        problems = check_source(source)
        if problems:
            forbidden = any(p.forbidden for p in problems)
            errors = [CompilerMessage(file=FILE, line=p.line, column=p.column, severity="error",
                                      message=("forbidden: " if p.forbidden else "") + p.message) for p in problems]
            log = "\n".join(f"{FILE}:{e.line}:{e.column}: error: {e.message}" for e in errors)
            return CompileResult(ok=False, status=Status.FORBIDDEN if forbidden else Status.COMPILE_ERROR, log=log,
                                 errors=errors, reason="; ".join(e.message for e in errors[:5]) if forbidden else "",
                                 seconds=time.perf_counter() - started)
        data = source.encode()
        digest = hashlib.sha256(data).hexdigest()
        target = self.cache_dir / "triton" / digest[:32] / FILE
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(target, data, mode=0o444)
        artifact = Artifact(backend=self.name, path=str(target), key=digest[:32], sha256=digest)
        if self.device not in COMPILE_ONLY:
            return CompileResult(ok=True, status=Status.OK, seconds=time.perf_counter() - started, artifact=artifact)
        task = task if task is not None else self._task_for(candidate.task_id)
        if task is None:
            message = (f"npu-frontend compiles for a task's cases, and task {candidate.task_id!r} is neither in the "
                       "built-in suite nor known to the backend (compile(candidate, task=task), "
                       "TritonBackend(tasks=[...]), an earlier verify of it, or "
                       "TritonBackend.frontend(artifact, task))")
            return CompileResult(ok=False, status=Status.HARNESS_ERROR, log=message, seconds=time.perf_counter() - started,
                                 errors=[CompilerMessage(file="", line=0, column=0, severity="error", message=message)])
        result = self.frontend(artifact, task)
        return result.model_copy(update={"seconds": time.perf_counter() - started})

    def frontend(self, artifact: Artifact, task: Task) -> CompileResult:
        """triton-ascend's front end on every launch of `task`'s cases by the checked source `artifact`, in the
        runner's sandbox (what compile adds on npu-frontend): compile feedback, with the artifact when it passed."""
        started = time.perf_counter()
        self._tasks.setdefault(task.id, task)
        found = ascend_frontend.probe(ascend_frontend.interpreter_path())
        if not found.usable:
            raise BackendError(f"triton device 'npu-frontend' is not usable here: {found.problem}")
        payload = {**self._payload(artifact, task), "python": found.executable, "prefixes": list(found.prefixes)}
        outcome = self._run("frontend", payload)
        seconds = time.perf_counter() - started
        data = outcome.result()
        if data is None:
            status, message = classify_crash(outcome, self.run_limits)
            return CompileResult(ok=False, status=status, log=redact(message + "\n" + outcome.stderr_tail),
                                 seconds=seconds,
                                 errors=[CompilerMessage(file="", line=0, column=0, severity="error", message=message)])
        result = ascend_frontend.compile_result(data, artifact, seconds, self.run_limits.wall_s)
        return result.model_copy(update={"log": redact(result.log)})

    def _task_for(self, task_id: str) -> Task | None:
        if task_id not in self._tasks:
            from kernelsage.tasks.loaders import load_suite

            task = load_suite("builtin", task_ids=[task_id]).get(task_id)
            if task is None:
                return None
            self._tasks[task_id] = task
        return self._tasks[task_id]

    def _not_run(self, task: Task) -> VerifyResult:
        self._tasks.setdefault(task.id, task)
        return VerifyResult(status=Status.HARNESS_ERROR, correct=False, message=NOT_RUN)

    def _payload(self, artifact: Artifact, task: Task) -> dict[str, Any]:
        job_task = self._job_task(artifact, task)
        return {"source": artifact.path, "source_sha256": artifact.sha256, "device": self.device,
                "threads": self.threads, "isolation": dataclasses.asdict(self.isolation),
                "limits": dataclasses.asdict(self.run_limits), "task": job_task}

    def _run(self, handler: str, payload: dict[str, Any]) -> Any:
        return self._run_job(f"{JOBS}:{handler}", payload, self.run_limits)

    def verify(self, artifact: Artifact, task: Task, *, trials: int | None = None,
               seed: int | None = None) -> VerifyResult:
        """Every case, `trials` rounds of fresh inputs, compared as the cpu backend does (METHOD §8)."""
        if self.device in COMPILE_ONLY:
            return self._not_run(task)
        seed = job_key() if seed is None else seed
        trials = trials or self.trials
        started = time.perf_counter()
        outcome = self._run("verify", {**self._payload(artifact, task), "trials": trials, "seed": seed})
        seconds = time.perf_counter() - started
        cases = [CaseResult.model_validate(e["data"]) for e in outcome.events if e.get("kind") == "case"]
        data = outcome.result()
        if data is None:
            status, message = classify_crash(outcome, self.run_limits)
            return VerifyResult(status=status, correct=False, cases=cases, trials=trials, seed=seed, seconds=seconds,
                                message=redact(message), stderr_tail=redact(outcome.stderr_tail))
        failure = next((case for case in cases if not case.passed), None)
        message = "" if failure is None else (failure.message or f"{failure.n_mismatch} of {failure.n_elements} "
                                              f"elements wrong in case {failure.case!r} (trial {failure.trial})")
        return VerifyResult(status=failure.status if failure else Status.OK, correct=failure is None and bool(cases),
                            cases=cases, trials=trials, seed=seed, seconds=seconds, message=redact(message),
                            stderr_tail=redact(data.get("stderr_tail", "")) if failure else "")

    def profile(self, artifact: Artifact, task: Task, *, warmup: int | None = None,
                reps: int | None = None) -> ProfileResult:
        """On interpret: not timed (see `untimed_profile`). On a GPU or NPU: the judge's clock (device_profile)."""
        if self.device == "interpret":
            return untimed_profile(task)
        if self.device in COMPILE_ONLY:
            self._tasks.setdefault(task.id, task)
            return ProfileResult(status=Status.HARNESS_ERROR, ok=False, case=task.perf_case.name, timed=False,
                                 message=NOT_RUN)
        payload = {**self._payload(artifact, task), "seed": job_key(),
                   "warmup": self.warmup if warmup is None else warmup, "reps": reps or self.reps}
        started = time.perf_counter()
        outcome = self._run("profile", payload)
        common = {"case": task.perf_case.name, "threads": self.threads, "seconds": time.perf_counter() - started}
        data = outcome.result()
        if data is None:
            status, message = classify_crash(outcome, self.run_limits)
            return ProfileResult(status=status, ok=False, message=redact(message),
                                 stderr_tail=redact(outcome.stderr_tail), **common)
        if data["status"] != "ok":
            return ProfileResult(status=Status(data["status"]), ok=False, message=redact(data.get("message", "")),
                                 **common)
        candidate, reference = Timing(**data["candidate"]), Timing(**data["reference"])
        return ProfileResult(status=Status.OK, ok=True, candidate=candidate, reference=reference,
                             speedup=reference.mean / candidate.mean if candidate.mean > 0 else 0.0,
                             output_correct=True, input_sets=int(data["input_sets"]),
                             round_trip_s=float(data["round_trip_s"]), fresh_inputs=bool(data["fresh_inputs"]),
                             unseen_calls=int(data["unseen_calls"]), contents=str(data["contents"]), **common)
