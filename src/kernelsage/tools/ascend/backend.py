"""The ascend backend: Ascend C candidates built with CANN, verified through torch_npu, timed on the NPU.

Construction checks the host (CANN, torch_npu's headers, the NPUs) and raises one `ToolchainProblem` naming
what is missing and the fix; nothing here imports torch_npu. Compile, verify and profile each run as a job of
a warm sandbox worker (`kernelsage.tools.sandbox`) whose child is the trusted judge; the compiler and the
candidate's device run are isolated by bubblewrap (docs/security.md, docs/ascend.md). Every result names the
SoC and CANN version it was obtained on.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kernelsage.errors import BackendError
from kernelsage.tasks.model import Task
from kernelsage.tools.ascend import commands
from kernelsage.tools.ascend.builder import JOBS, AscendBuilder
from kernelsage.tools.ascend.candidate import DIRECT, SUITE
from kernelsage.tools.ascend.devices import (
    DEFAULT_SOC,
    SOC_ENV,
    DevicePool,
    core_memory,
    list_npus,
    npu_arch,
    selected_devices,
)
from kernelsage.tools.ascend.glue import MODULE_FILE, HostHeaders, host_headers
from kernelsage.tools.ascend.python_mirror import PythonMirror
from kernelsage.tools.ascend.sandboxing import python_paths, reachable_by_others, read_only_paths
from kernelsage.tools.ascend.store import AscendCache
from kernelsage.tools.ascend.suite_build import candidate_files_for, suite_task_of
from kernelsage.tools.ascend.suite_rules import FULL, KERNEL_ONLY, MODE_ENV, rules_for
from kernelsage.tools.ascend.suite_task import kernel_template_for_prompt
from kernelsage.tools.ascend.toolchain import Toolchain, ToolchainProblem, detect_toolchain
from kernelsage.tools.isolated_backend import IsolatedBackend, job_key
from kernelsage.tools.isolation import Isolation, give_to_sandbox
from kernelsage.tools.judging.resources import cache_root
from kernelsage.tools.redaction import redact
from kernelsage.tools.results import (
    Artifact,
    Candidate,
    CaseResult,
    CompileResult,
    ProfileResult,
    Status,
    Timing,
    VerifyResult,
)
from kernelsage.tools.sandbox import ChildOutcome, Limits, Sandbox, classify_crash
from kernelsage.tools.timing import DEFAULT_REPS, DEFAULT_WARMUP

WORKSPACE_BYTES = 16 << 20


class AscendBackend(IsolatedBackend):
    """compile / verify / profile of Ascend C candidates on this host's NPUs (a pool: one job per device)."""

    name = "ascend"
    candidate_files: tuple[str, ...] = ("kernel.cpp",)

    def __init__(
        self, *, devices: Sequence[int] | None = None, soc: str | None = None, cache_dir: str | Path | None = None,
        trials: int | None = None, warmup: int = DEFAULT_WARMUP, reps: int = DEFAULT_REPS, profile_sets: int = 3,
        compile_limits: Limits | None = None, run_limits: Limits | None = None, unsafe_no_isolation: bool = False,
        isolation: Isolation | None = None, toolchain: Toolchain | None = None, headers: HostHeaders | None = None,
        environ: Mapping[str, str] | None = None, build_workers: int | None = None,
        workspace_bytes: int = WORKSPACE_BYTES, template_mode: str | None = None,
    ) -> None:
        environ = os.environ if environ is None else environ
        # NPUKernelBench's template mode (kernel_only | full) where the user overrides the suite's own
        self.template_mode = template_mode if template_mode is not None else environ.get(MODE_ENV, "")
        if self.template_mode not in ("", KERNEL_ONLY, FULL):
            raise ToolchainProblem(f"{MODE_ENV}={self.template_mode!r}: use {KERNEL_ONLY} or {FULL}")
        self._trials_given = trials is not None
        self.toolchain = toolchain or detect_toolchain(environ)
        self.headers = headers or host_headers()
        if devices is None:
            npus, problem = list_npus(environ)
            if not npus:
                raise ToolchainProblem(f"the ascend backend found no NPU: {problem}; install the Ascend driver "
                                       "(npu-smi info must list the devices) or pass devices=[...]")
            devices = selected_devices(environ, npus)
            soc = soc or environ.get(SOC_ENV) or npus[0].soc
        self.soc = soc or environ.get(SOC_ENV) or DEFAULT_SOC
        self.arch = npu_arch(self.soc)
        self.pool = DevicePool(devices)
        self.cache_dir = Path(cache_dir) if cache_dir else cache_root().with_name("ascend-builds")
        self.trials, self.warmup, self.reps, self.profile_sets = trials or 3, warmup, reps, profile_sets
        self.workspace_bytes = workspace_bytes
        self.compile_limits = compile_limits or Limits(wall_s=900, cpu_s=1800, memory_bytes=16 << 30,
                                                       file_bytes=1 << 30)
        self.run_limits = run_limits or Limits(wall_s=300, cpu_s=600, memory_bytes=64 << 30)
        self._init_isolation(unsafe_no_isolation, isolation)
        self._cache = AscendCache(self.cache_dir)
        self.builder = AscendBuilder(toolchain=self.toolchain, headers=self.headers, soc=self.soc, arch=self.arch,
                                     cache=self._cache, limits=self.compile_limits, platform=self.platform,
                                     workers=build_workers or len(self.pool.devices))
        self._device_sandboxes = {device: Sandbox(threads=1, preload=(JOBS,)) for device in self.pool.devices}
        self._python_mirror = PythonMirror()

    @property
    def platform(self) -> str:
        """What every result was obtained on: SoC, architecture and CANN version."""
        return f"{self.soc} ({self.arch}), CANN {self.toolchain.cann_version}"

    def close(self) -> None:
        for sandbox in self._device_sandboxes.values():
            sandbox.close()
        self.builder.close()
        self._python_mirror.close()

    def compile(self, candidate: Candidate, task: Task | None = None) -> CompileResult:
        """Layout and safeguard checks, then a verified cached build or a fresh isolated one. With the `task`,
        a task that brings its own glue (NPUKernelBench's validation/pybind.cpp) is built through it, in its
        suite's template mode (kernel-only: the candidate is op_kernel/<op>.cpp alone)."""
        return self.builder.compile(candidate, self.isolation, self._mirrored(self.isolation), task=task,
                                    mode=self.template_mode)

    def candidate_files_for(self, task: Task) -> tuple[str, ...]:
        """The files the model writes for `task`: its suite's operator files where the task brings its own
        glue (kernel-only: op_kernel/<op>.cpp), else `candidate_files`."""
        suite = suite_task_of(task)
        if suite is None:
            return self.candidate_files
        return candidate_files_for(suite, rules_for(task, self.template_mode).kernel_only)

    def given_files_for(self, task: Task) -> dict[str, str]:
        """The question's files of a task that brings its own glue, as the model is shown them: its op_host
        (kernel-only: built as given; full: the model's starting point) and its op_kernel, in kernel-only mode
        with the signature cut after `workspace` as upstream's prompt shows it (the build adds the tiling
        argument); none for other tasks."""
        suite = suite_task_of(task)
        if suite is None:
            return {}
        kernel_only = rules_for(task, self.template_mode).kernel_only
        shown = {suite.host_file: suite.question_host, suite.kernel_file:
                 kernel_template_for_prompt(suite.question_kernel) if kernel_only else suite.question_kernel}
        return {name: text for name, text in shown.items() if text}

    def _mirrored(self, isolation: Isolation) -> list[tuple[str, str]]:
        """The Python environment's parts the sandbox's user cannot reach (under /root), as mirrors to bind
        where they are (`python_mirror`); none when the sandbox runs as ourselves."""
        if isolation.user is None:
            return []
        hidden = [p for p in python_paths() if not reachable_by_others(p)]
        return self._python_mirror.binds(hidden, sys.path, isolation.user) if hidden else []

    # verify and profile ----------------------------------------------------------------------------------

    def _job_payload(self, artifact: Artifact, task: Task, device: int) -> dict[str, Any]:
        if artifact.backend != self.name:
            raise BackendError(f"artifact was built by the {artifact.backend!r} backend, not {self.name!r}")
        if not AscendCache.intact(artifact):
            raise BackendError(f"artifact {artifact.path} is missing or changed since it was built; compile the "
                               "candidate again")
        if task.origin is None:
            raise BackendError(f"task {task.id!r} was not loaded from a suite; load it with "
                               "kernelsage.tasks.loaders.load_suite so the sandbox can load it too")
        root = Path(artifact.path)
        isolation = self.isolation
        mirrored = self._mirrored(isolation)
        route = DIRECT if not (root / commands.OPGEN_INSTALL).exists() else \
            SUITE if (root / commands.SUITE_GLUE).exists() else "msopgen"
        vendor = root / commands.OPGEN_INSTALL / "vendors" / commands.OPGEN_VENDOR
        return {"module": str(root / MODULE_FILE), "artifact": str(root), "artifact_sha256": artifact.sha256,
                "route": route, "custom_opp": str(vendor) if route != DIRECT else "",
                "attr_order": json.loads((root / commands.OPGEN_ATTRS).read_text()) if route != DIRECT else [],
                "rules": dataclasses.asdict(rules_for(task, self.template_mode)),
                "device": device, "soc": self.soc, "memory": list(core_memory(self.soc)),
                "workspace_bytes": self.workspace_bytes, "env": dict(self.toolchain.environment),
                "read_only": read_only_paths(self.toolchain.ascend_home, other_user=isolation.user is not None),
                "mirrored": mirrored,
                "isolation": dataclasses.asdict(isolation), "limits": dataclasses.asdict(self.run_limits),
                "task": {"id": task.id, "origin": dataclasses.asdict(task.origin)}}

    def _run(self, device: int, handler: str, payload: dict[str, Any]) -> ChildOutcome:
        sandbox = self._device_sandboxes[device]
        workdir = sandbox.workdir()
        try:
            give_to_sandbox(workdir, self.isolation, within=sandbox.root)
            return sandbox.run(f"{JOBS}:{handler}", payload, self._limits(self.run_limits), workdir)
        finally:
            sandbox.discard(workdir)

    def verify(self, artifact: Artifact, task: Task, *, trials: int | None = None,
               seed: int | None = None) -> VerifyResult:
        """All test cases, `trials` rounds of fresh inputs, compared on the judge's side (METHOD §8)."""
        seed = job_key() if seed is None else seed
        # the suite's own trial count unless this backend or this call was given one
        trials = trials or (self.trials if self._trials_given else rules_for(task, self.template_mode).trials)
        started = time.perf_counter()
        with self.pool.lease() as device:
            payload = {**self._job_payload(artifact, task, device), "trials": trials, "seed": seed}
            outcome = self._run(device, "verify", payload)
        seconds = time.perf_counter() - started
        cases = [CaseResult.model_validate(e["data"]) for e in outcome.events if e.get("kind") == "case"]
        data = outcome.result()
        common = {"trials": trials, "seed": seed, "seconds": seconds}
        if data is None:
            status, message = classify_crash(outcome, self.run_limits)
            return VerifyResult(status=status, correct=False, cases=cases, message=redact(f"{message} (on "
                                f"{self.platform})"), stderr_tail=redact(outcome.stderr_tail), **common)
        failure = next((case for case in cases if not case.passed), None)
        if failure is None and not cases:
            return VerifyResult(status=Status.HARNESS_ERROR, correct=False, message="no case was judged", **common)
        message = f"on {self.platform}" if failure is None else \
            f"{failure.message or f'{failure.n_mismatch} of {failure.n_elements} elements wrong'} (on {self.platform})"
        return VerifyResult(status=failure.status if failure else Status.OK, correct=failure is None, cases=cases,
                            message=redact(message), stderr_tail=redact(data.get("stderr_tail", "")) if failure else "",
                            **common)

    def profile(self, artifact: Artifact, task: Task, *, warmup: int | None = None,
                reps: int | None = None) -> ProfileResult:
        """The reference and the candidate timed with NPU events by the same method; the output checked."""
        started = time.perf_counter()
        with self.pool.lease() as device:
            payload = {**self._job_payload(artifact, task, device), "seed": job_key(),
                       "sets": self.profile_sets, "warmup": self.warmup if warmup is None else warmup,
                       "reps": reps or self.reps}
            outcome = self._run(device, "profile", payload)
        common = {"case": task.perf_case.name, "threads": 0, "seconds": time.perf_counter() - started}
        data = outcome.result()
        if data is None:
            status, message = classify_crash(outcome, self.run_limits)
            return ProfileResult(status=status, ok=False, message=redact(f"{message} (on {self.platform})"),
                                 stderr_tail=redact(outcome.stderr_tail), **common)
        if data["status"] != "ok":
            return ProfileResult(status=Status(data["status"]), ok=False,
                                 message=redact(f"{data.get('message', '')} (on {self.platform})"),
                                 stderr_tail=redact(data.get("stderr_tail", "")), **common)
        candidate, reference = Timing(**data["candidate"]), Timing(**data["reference"])
        return ProfileResult(
            status=Status.OK, ok=True, candidate=candidate, reference=reference,
            speedup=reference.mean / candidate.mean if candidate.mean > 0 else 0.0,
            output_correct=bool(data["output_correct"]), input_sets=int(data["input_sets"]),
            message=f"NPU event timing on {data.get('soc') or self.soc} ({self.arch}), CANN "
                    f"{self.toolchain.cann_version}", **{**common, "case": data["case"]})
