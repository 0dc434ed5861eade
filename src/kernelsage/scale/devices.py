"""Device pools: one evaluator actor per device, and the backend a stream uses to send jobs to them.

A stream compiles on its own worker (compiles run in parallel anywhere); verify and profile go to the pool,
whose evaluators run one job at a time, so a timed run holds its device alone. Ray places each evaluator on
its device (`resources={"NPU": 1}` sets ASCEND_RT_VISIBLE_DEVICES, `num_gpus=1` CUDA_VISIBLE_DEVICES) and
restarts one that dies; a job it was running is retried on the new one (verify and profile change nothing
outside their result, so a retry is safe). The cpu backend's evaluators and the pool stay on the driver's
node (placement.py), so a lost worker node takes none of them.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelsage.errors import ConfigurationError
from kernelsage.scale.cluster import import_ray
from kernelsage.scale.placement import pinned_to

JOB_RETRIES = 3  # retries of a job whose evaluator died under it (each on the restarted actor)


@dataclass(frozen=True)
class DevicePlan:
    """How many evaluators a backend gets on this cluster, and the Ray resources each one holds."""

    kind: str  # what one evaluator holds, in words
    count: int
    resources: dict[str, Any]


def device_plan(backend: str, cluster: dict[str, float], cpu_slots: int) -> DevicePlan:
    """One evaluator per NPU for ascend, per GPU for a GPU backend, `cpu_slots` CPU slots for the cpu backend."""
    if backend == "cpu":
        if cpu_slots < 1:
            raise ConfigurationError(f"--eval-slots {cpu_slots}: give at least 1")
        return DevicePlan("CPU slot", cpu_slots, {"num_cpus": 1})
    resource, options = ("NPU", {"num_cpus": 0, "resources": {"NPU": 1}}) if backend == "ascend" else \
        ("GPU", {"num_cpus": 0, "num_gpus": 1})
    count = int(cluster.get(resource, 0))
    if count < 1:
        raise ConfigurationError(f"--backend {backend} with --ray: the cluster offers no {resource} (start each host "
                                 f"with `ray start` where Ray sees its devices, or `--resources '{{\"{resource}\": 8}}'`)")
    return DevicePlan(resource, count, options)


@dataclass(frozen=True)
class Receipt:
    """A job's result and where and when it ran (the pool's record of device use)."""

    result: Any
    device: int
    pid: int
    started: float
    ended: float


class Evaluator:
    """The only process that runs candidates on one device: verify and profile, one job at a time."""

    def __init__(self, backend: str, suite: str, suite_format: str, device: int, slots: int = 1) -> None:
        from kernelsage.tasks.loaders import load_suite
        from kernelsage.tools.backend import get_backend

        options: dict[str, Any] = {}
        if backend == "cpu" and slots > 1:  # CPU slots of one host share its cores rather than each take all
            from kernelsage.tools.judging.resources import default_threads

            options["threads"] = max(1, default_threads() // slots)
        self.backend = get_backend(backend, **options)
        self.suite = load_suite(suite, suite_format)
        self.device = device

    def pid(self) -> int:
        return os.getpid()

    def run(self, kind: str, task_id: str, artifact: Any, candidate: Any) -> Receipt:
        from kernelsage.tasks.loaders import find_task

        started = time.time()
        task = find_task(self.suite, task_id)
        if not Path(artifact.path).exists() and candidate is not None:  # built on another host: build it here
            artifact = self.backend.compile(candidate, task=task).artifact or artifact
        result = getattr(self.backend, kind)(artifact, task)
        return Receipt(result, self.device, os.getpid(), started, time.time())


class DevicePool:
    """Hands each job to a free evaluator; the queue of free ones is what keeps a device to one job."""

    def __init__(self, evaluators: list[Any]) -> None:
        self.evaluators = evaluators
        self.free: asyncio.Queue[int] = asyncio.Queue()
        for index in range(len(evaluators)):
            self.free.put_nowait(index)

    async def run(self, kind: str, task_id: str, artifact: Any, candidate: Any) -> Receipt:
        index = await self.free.get()
        try:
            return await self.evaluators[index].run.remote(kind, task_id, artifact, candidate)
        finally:
            self.free.put_nowait(index)

    async def busy(self) -> tuple[int, int]:
        """Devices running a job now, and devices in all."""
        return len(self.evaluators) - self.free.qsize(), len(self.evaluators)

    async def pids(self) -> list[int]:
        return [await e.pid.remote() for e in self.evaluators]


def start_pool(ray: Any, plan: DevicePlan, *, backend: str, suite: str, suite_format: str,
               evaluators_on: str | None = None, pool_on: str | None = None) -> Any:
    """The evaluator actors of `plan` (device_plan, checked by the caller against the cluster) behind one pool
    actor; each kept on the node named (capacity.evaluator_home, the driver's), else where Ray places it."""
    evaluator = ray.remote(max_restarts=-1, max_task_retries=JOB_RETRIES)(Evaluator)
    evaluators = [evaluator.options(**plan.resources, **pinned_to(evaluators_on))
                  .remote(backend, suite, suite_format, device, plan.count) for device in range(plan.count)]
    return ray.remote(num_cpus=0, max_concurrency=1000)(DevicePool).options(**pinned_to(pool_on)).remote(evaluators)


class PooledBackend:
    """A KernelBackend for a stream's worker: compiles here, verifies and profiles on the device pool."""

    def __init__(self, local: Any, pool: Any) -> None:
        self.local = local
        self.pool = pool
        self.name = local.name
        self.candidate_files = local.candidate_files
        self.contract_package = getattr(local, "contract_package", None)  # a user's backend's prompt contract
        self._candidates: dict[str, Any] = {}  # artifact key -> its candidate, to rebuild it on another host

    def compile(self, candidate: Any, *, task: Any = None) -> Any:
        result = self.local.compile(candidate, task=task)
        if result.artifact is not None:
            self._candidates[result.artifact.key] = candidate
        return result

    def candidate_files_for(self, task: Any) -> tuple[str, ...]:
        from kernelsage.tools.backend import files_to_write

        return files_to_write(self.local, task)

    def given_files_for(self, task: Any) -> dict[str, str]:
        from kernelsage.tools.backend import given_files

        return given_files(self.local, task)

    def verify(self, artifact: Any, task: Any) -> Any:
        return self._run("verify", artifact, task)

    def profile(self, artifact: Any, task: Any) -> Any:
        return self._run("profile", artifact, task)

    def _run(self, kind: str, artifact: Any, task: Any) -> Any:
        ray = import_ray()
        receipt = ray.get(self.pool.run.remote(kind, task.id, artifact, self._candidates.get(artifact.key)))
        return receipt.result

    def close(self) -> None:
        self.local.close()

    def __enter__(self) -> PooledBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
