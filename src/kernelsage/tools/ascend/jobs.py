"""What a sandbox worker's child does for the ascend backend: build, verify, profile.

The child is the trusted side (the judge). Untrusted work runs in processes it starts: each build step in
bubblewrap with the CANN installation read-only and only the build directory writable; the candidate's
device run (`device_runner`) in bubblewrap with its NPU's device nodes. The judge makes the inputs and the
CPU reference (as NPUKernelBench does), reads back the run's outputs as untrusted data and decides.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from kernelsage.tasks.model import Task
from kernelsage.tools.ascend import verdicts
from kernelsage.tools.ascend.candidate import SUITE
from kernelsage.tools.ascend.commands import OPGEN_INSTALL, OPGEN_VENDOR
from kernelsage.tools.ascend.devices import device_nodes
from kernelsage.tools.ascend.glue import MODULE_FILE
from kernelsage.tools.ascend.sandboxing import device_popen_options, with_device_nodes
from kernelsage.tools.ascend.store import copy_regular_tree, tree_digest
from kernelsage.tools.ascend.suite_call import suite_arguments
from kernelsage.tools.diagnostics import keep_start
from kernelsage.tools.isolation import Isolation, Rlimits, popen_options, sandboxed
from kernelsage.tools.judging.core import HarnessFailure
from kernelsage.tools.judging.instances import case_seed, dtype_name, instantiate, reference, run_reference
from kernelsage.tools.judging.tasks import prepare_task
from kernelsage.tools.results import Status
from kernelsage.tools.timing import timing_from_samples

Emit = Callable[[dict[str, Any]], None]
prepare = prepare_task  # the worker loads (and caches) the job's task before forking
LOG_LIMIT = 40000
JOB_DIR = "/job"


@dataclasses.dataclass
class DeviceRun:
    """How one device_runner process ended."""

    returncode: int | None
    timed_out: bool
    result: dict[str, Any] | None
    stderr_tail: str
    seconds: float
    sandbox_started: bool = True  # False: bubblewrap never started the runner (the harness's failure)


def _rlimits(limits: dict[str, Any]) -> Rlimits:
    return Rlimits(address_space=int(limits["memory_bytes"]), cpu_s=int(limits["cpu_s"]),
                   file_bytes=int(limits["file_bytes"]), processes=1024)


def build(payload: dict[str, Any], task: Task | None, emit: Emit) -> None:
    """Run the build steps in ./build, each isolated, stopping at the first that fails."""
    emit({"kind": "phase", "phase": "compile"})
    isolation = Isolation(**payload["isolation"])
    limits = payload["limits"]
    build_dir = Path.cwd() / "build"
    env = {**payload["env"], "HOME": "/tmp", "TMPDIR": "/tmp"}
    if not isolation.available:
        env.update(HOME=str(build_dir), TMPDIR=str(build_dir))
    ro = [(path, path) for path in payload["read_only"]] + [(m, p) for m, p in payload.get("mirrored", ())]
    started = time.perf_counter()
    log: list[str] = []
    data: dict[str, Any] = {"returncode": 0, "failed_step": ""}
    for name, argv in payload["steps"]:
        command = sandboxed(isolation, list(argv), env=env, limits=_rlimits(limits), ro_binds=ro,
                            rw_binds=[(str(build_dir), "/build")], chdir="/build", tmp_bytes=1 << 30)
        left = float(limits["wall_s"]) - (time.perf_counter() - started)
        try:
            completed = subprocess.run(command, capture_output=True, text=True, errors="replace", check=False,
                                       timeout=max(left, 1.0), cwd=build_dir, env=env, **popen_options(isolation))
        except subprocess.TimeoutExpired:
            data.update(timeout=True, failed_step=name)
            break
        except OSError as exc:
            data.update(returncode=127, failed_step=name, tool_missing=True)
            log.append(f"$ {name}\n{exc}")
            break
        log.append(f"$ {name}\n{completed.stdout}{completed.stderr}".rstrip())
        if completed.returncode != 0:
            # bubblewrap's own refusal, or a tool that is not there, is the harness's fault, not the candidate's
            harness = completed.stderr.startswith("bwrap: ") or (
                completed.returncode in (126, 127) and "not found" in completed.stderr)
            data.update(returncode=completed.returncode, failed_step=name, tool_missing=harness)
            break
    data.update(seconds=time.perf_counter() - started, log=keep_start("\n".join(log), LOG_LIMIT))
    emit({"kind": "result", "data": data})


def run_device(payload: dict[str, Any], request: dict[str, Any], *, sandbox: bool) -> DeviceRun:
    """Start device_runner on the job's NPU: isolated with the device nodes (the candidate) or as the
    trusted judge's helper (the reference)."""
    isolation = Isolation(**payload["isolation"])
    limits = payload["limits"]
    job_dir = Path.cwd()
    inside = JOB_DIR if sandbox and isolation.available else str(job_dir)
    env = {**payload["env"], "ASCEND_RT_VISIBLE_DEVICES": str(payload["device"]),
           "TORCH_DEVICE_BACKEND_AUTOLOAD": "0", "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "HOME": "/tmp" if sandbox else str(job_dir)}
    if sandbox:
        # The sandbox reads the candidate from its own job directory: a copy checked against the recorded
        # hash (the build cache may live where the sandbox's uid cannot read, and cannot change under it).
        staged = job_dir / "candidate"
        copy_regular_tree(Path(payload["artifact"]), staged)
        if tree_digest(staged) != payload["artifact_sha256"]:
            raise HarnessFailure("the candidate's build changed since it was built (hash mismatch); compile again")
        request = {**request, "module": f"{inside}/candidate/{MODULE_FILE}"}
        # only the candidate's own package, never the caller's operator path
        env.pop("ASCEND_CUSTOM_OPP_PATH", None)
        if payload.get("custom_opp"):
            env["ASCEND_CUSTOM_OPP_PATH"] = f"{inside}/candidate/{OPGEN_INSTALL}/vendors/{OPGEN_VENDOR}"
    torch.save(request, job_dir / "request.pt")
    argv = [sys.executable, "-m", "kernelsage.tools.ascend.device_runner", f"{inside}/request.pt",
            f"{inside}/result.pt"]
    options: dict[str, Any] = {}
    info_read = info_write = -1
    if sandbox:
        nodes = device_nodes([int(payload["device"])])
        # the environment's readable parts, and mirrors of those the sandbox's user cannot reach (python_mirror)
        ro = [(path, path) for path in payload["read_only"]] + [(m, p) for m, p in payload.get("mirrored", ())]
        if isolation.available:  # the runner writes here first thing, so a sandbox that never stood shows
            info_read, info_write = os.pipe()
            argv.append(str(info_write))
        command = sandboxed(isolation, argv, env=env, limits=_rlimits(limits), ro_binds=ro,
                            rw_binds=[(str(job_dir), JOB_DIR)], chdir=inside, tmp_bytes=256 << 20)
        command = with_device_nodes(command, isolation, nodes)
        options = device_popen_options(isolation, nodes)
        if info_write >= 0:
            options["pass_fds"] = (info_write,)
    else:
        command = argv
    started = time.perf_counter()
    result_path = job_dir / "result.pt"
    try:
        completed = subprocess.run(command, capture_output=True, text=True, errors="replace", check=False,
                                   timeout=float(limits["wall_s"]), cwd=job_dir, env=env, **options)
    except subprocess.TimeoutExpired as exc:
        if info_read >= 0:
            os.close(info_read)
        tail = (exc.stderr or b"")[-2000:]
        return DeviceRun(None, True, None, tail.decode(errors="replace") if isinstance(tail, bytes) else tail,
                         time.perf_counter() - started)
    finally:
        if info_write >= 0:
            os.close(info_write)
    sandbox_started = True
    if info_read >= 0:  # unlike its stderr, written before any candidate code ran (and then closed)
        with os.fdopen(info_read, "rb") as info:
            sandbox_started = info.read(len(verdicts.STARTED)) == verdicts.STARTED
    result = None
    if result_path.is_file():
        try:
            result = torch.load(result_path, weights_only=True)  # untrusted: tensors and plain values only
        except Exception as exc:
            result = {"failure": "error", "error": f"the run's result could not be read: {exc}"}
    return DeviceRun(completed.returncode, False, result if isinstance(result, dict) else None,
                     completed.stderr[-4000:], time.perf_counter() - started, sandbox_started)


def _request(payload: dict[str, Any], mode: str) -> dict[str, Any]:
    request = {"mode": mode, "module": payload["module"], "route": payload["route"],
               "workspace_bytes": int(payload["workspace_bytes"]), "memory": list(payload["memory"]),
               "soc": payload["soc"]}
    if payload["route"] == SUITE:  # the run calls the task's own ModelNew (its module.py, read by the judge)
        request["model_source"] = (Path(payload["task"]["origin"]["path"]) / "validation" / "module.py").read_text(
            encoding="utf-8")
    return request


@dataclasses.dataclass(frozen=True)
class SuiteSet:
    """One instance for the task's own ModelNew, as the judge keeps it."""

    item: dict[str, Any]  # what the run gets: init and forward arguments in their structure, and the outputs'
    # dtypes and shapes (to poison the device memory the suite's glue will allocate them from)
    expected: tuple[torch.Tensor, ...]  # the reference's outputs
    private: list[torch.Tensor]  # the forward inputs as the reference left them (an in-place operator's results)
    names: list[str]
    aliased: frozenset[int]  # forward inputs the reference returns as outputs (in place): judged as outputs


def suite_set(task: Task, case: Any, seed: int) -> SuiteSet:
    """The judge's side of one instance run through the task's own ModelNew. Which inputs are outputs too is
    worked out here from the trusted reference, never taken from the run."""
    instance = instantiate(task, case, seed)
    init, forward_args = suite_arguments(task, case, seed, instance)
    outputs = run_reference(instance, case)  # after: an in-place reference changes the instance's inputs
    forward = {n: t for n, t in instance.inputs.items() if not n.startswith(("param.", "buffer."))}
    returned = {o.data_ptr() for o in outputs if o.numel()}
    return SuiteSet(item={"init": init, "args": forward_args,
                          "outputs": [(dtype_name(e.dtype), list(e.shape)) for e in outputs]},
                    expected=outputs, private=[t.clone() for t in forward.values()], names=list(forward),
                    aliased=frozenset(i for i, t in enumerate(forward.values()) if t.numel() and t.data_ptr() in returned))


def _set(instance: Any, expected: Sequence[torch.Tensor], attr_order: Sequence[str]) -> dict[str, Any]:
    return {"inputs": [t.contiguous() for t in instance.inputs.values()], "attrs": dict(instance.attrs),
            "attr_args": verdicts.attr_args(dict(instance.attrs), attr_order),
            "outputs": [(dtype_name(e.dtype), list(e.shape)) for e in expected]}


def verify(payload: dict[str, Any], task: Task, emit: Emit) -> None:
    """Every case, `trials` rounds of fresh inputs, one device run for all; compared on the judge's side."""
    emit({"kind": "phase", "phase": "reference"})
    sets, calls, expected, private, names, aliased = [], [], [], [], [], []
    suite = payload["route"] == SUITE
    for trial in range(payload["trials"]):
        for index, case in enumerate(task.cases):
            seed = case_seed(payload["seed"], trial, index)
            if suite:
                made = suite_set(task, case, seed)
                sets.append(made.item)
                calls.append({"set": len(sets) - 1, "trial": trial, "case": case.name})
                expected.append(made.expected)
                private.append(made.private)
                names.append(made.names)
                aliased.append(made.aliased)
                continue
            instance, outputs = reference(task, case, seed)
            try:
                sets.append(_set(instance, outputs, payload["attr_order"]))
            except verdicts.AttributeMismatch as exc:
                emit({"kind": "case", "data": {"case": case.name, "trial": trial, "passed": False,
                                               "status": Status.RUNTIME_ERROR.value, "message": str(exc)}})
                emit({"kind": "result", "data": {"done": True, "stderr_tail": ""}})
                return
            calls.append({"set": len(sets) - 1, "trial": trial, "case": case.name})
            expected.append(outputs)
            private.append([t.clone() for t in sets[-1]["inputs"]])
            names.append(list(instance.inputs))
    emit({"kind": "phase", "phase": "candidate"})
    run = run_device(payload, {**_request(payload, "verify"), "sets": sets, "calls": calls}, sandbox=True)
    emit({"kind": "phase", "phase": "compare"})
    cases = verdicts.judge_verify(task, calls, expected, private, names, run.result, run.returncode,
                                  run.timed_out, run.stderr_tail, float(payload["limits"]["wall_s"]),
                                  run.sandbox_started, nonfinite=(payload.get("rules") or {}).get("nonfinite_fails", ""),
                                  aliased=aliased if suite else None)
    for case in cases:
        emit({"kind": "case", "data": case})
    emit({"kind": "result", "data": {"done": True, "stderr_tail": run.stderr_tail}})


def profile(payload: dict[str, Any], task: Task, emit: Emit) -> None:
    """The reference (trusted, on the NPU) and the candidate (isolated) timed by the same method on the
    performance case's rotating input sets; the candidate's output on the first set is checked."""
    emit({"kind": "phase", "phase": "reference"})
    case = task.perf_case
    seeds = [case_seed(payload["seed"], 0, index) for index in range(int(payload["sets"]))]
    try:
        if payload["route"] == SUITE:
            made = [suite_set(task, case, seed) for seed in seeds]
            first_expected, sets = made[0].expected, [one.item for one in made]
        else:
            first, first_expected = reference(task, case, seeds[0])  # the other sets only need inputs
            sets = [_set(instance, first_expected, payload["attr_order"])
                    for instance in [first, *(instantiate(task, case, seed) for seed in seeds[1:])]]
    except verdicts.AttributeMismatch as exc:
        emit({"kind": "result", "data": {"status": Status.RUNTIME_ERROR.value, "message": str(exc)}})
        return
    timing = {"warmup": int(payload["warmup"]), "reps": int(payload["reps"])}
    ref = run_device(payload, {"mode": "reference", "origin": payload["task"]["origin"],
                               "task_id": payload["task"]["id"], "case": case.name, "seeds": seeds, **timing},
                     sandbox=False)
    if ref.result is None or "samples" not in ref.result:
        detail = (ref.result or {}).get("error") or ref.stderr_tail.strip().splitlines()[-1:] or ["no result"]
        raise HarnessFailure(f"the reference did not run on the NPU: {detail if isinstance(detail, str) else detail[0]}")
    emit({"kind": "phase", "phase": "candidate"})
    run = run_device(payload, {**_request(payload, "profile"), "sets": sets, **timing}, sandbox=True)
    emit({"kind": "phase", "phase": "compare"})
    status, message = verdicts.device_failure(run.result, run.returncode, run.timed_out, run.stderr_tail,
                                              float(payload["limits"]["wall_s"]), run.sandbox_started)
    if status is not None:
        emit({"kind": "result", "data": {"status": status.value, "message": message, "stderr_tail": run.stderr_tail}})
        return
    assert run.result is not None
    check = verdicts.judge_outputs(task, case, first_expected, run.result.get("outputs"), run.result.get("code"),
                                   nonfinite=(payload.get("rules") or {}).get("nonfinite_fails", ""))
    try:
        reference_samples = verdicts.checked_samples(ref.result["samples"], timing["reps"])
    except ValueError as exc:
        raise HarnessFailure(f"the reference's run on the NPU: {exc}") from exc
    try:  # the candidate's process reported its timings: malformed ones are its fault
        candidate_samples = verdicts.checked_samples(run.result.get("samples"), timing["reps"])
    except ValueError as exc:
        emit({"kind": "result", "data": {"status": Status.RUNTIME_ERROR.value, "message": str(exc),
                                         "stderr_tail": run.stderr_tail}})
        return
    candidate = timing_from_samples(candidate_samples, warmup=timing["warmup"])
    reference_timing = timing_from_samples(reference_samples, warmup=timing["warmup"])
    emit({"kind": "result", "data": {
        "status": "ok", "case": case.name, "candidate": candidate.model_dump(), "reference": reference_timing.model_dump(),
        "output_correct": bool(check["passed"]), "input_sets": len(sets), "round_trip_s": 0.0,
        "soc": str(run.result.get("soc", ""))}})
