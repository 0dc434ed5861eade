"""A cluster that could only wait is refused before any stream starts, in one line that says what to change;
a stream that waits says why; what the cluster lost past Ray's retries is said in one line."""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from rich.console import Console

from kernelsage.errors import ClusterError
from kernelsage.scale.board import Display, progress_events, waiting_streams
from kernelsage.scale.capacity import Node, alive_nodes, capacity_problem, evaluator_home, waiting_reason
from kernelsage.scale.devices import device_plan
from kernelsage.scale.faults import cluster_failure
from kernelsage.scale.simulate import SIMULATED_STREAM_CPUS
from kernelsage.scale.streams import STREAM_CPUS
from tests.scale.helpers import compare_args, env, kernelsage, order_file


def _cpu(slots: int):
    return device_plan("cpu", {"CPU": 64.0}, slots)


def _one_line(problem: str | None) -> str:
    assert problem is not None and "\n" not in problem
    return problem


def test_an_evaluator_on_the_only_cpu_leaves_no_room_for_a_stream() -> None:
    nodes = [Node("head", {"CPU": 1.0})]
    problem = _one_line(capacity_problem(nodes, _cpu(1), STREAM_CPUS, evaluator_home(nodes, _cpu(1), "head")))
    assert "no stream can start" in problem and "--ray-cpus 2" in problem
    assert "--eval-slots 0" not in problem  # one slot is the fewest: only more CPUs help


def test_as_many_slots_as_cpus_are_refused_and_fewer_slots_suggested() -> None:
    nodes = [Node("head", {"CPU": 2.0})]
    problem = _one_line(capacity_problem(nodes, _cpu(2), STREAM_CPUS, "head"))
    assert "--eval-slots 1 or more CPUs" in problem and "--ray-cpus 3" in problem
    assert capacity_problem(nodes, _cpu(1), STREAM_CPUS, "head") is None
    many = _one_line(capacity_problem([Node("head", {"CPU": 4.0})], _cpu(6), STREAM_CPUS, "head"))
    assert "--eval-slots 3" in many  # the most slots that still leave a stream its quarter CPU


def test_room_counts_per_node_not_in_the_sum() -> None:
    # 0.1 CPU left on the driver's node and 0.2 on the other: 0.3 in all, but no node holds a quarter
    nodes = [Node("head", {"CPU": 1.1}), Node("other", {"CPU": 0.2})]
    assert _one_line(capacity_problem(nodes, _cpu(1), STREAM_CPUS, "head"))
    roomy = [Node("head", {"CPU": 1.0}), Node("other", {"CPU": 1.0})]
    assert capacity_problem(roomy, _cpu(1), STREAM_CPUS, "head") is None  # the evaluator's node is full, the other not


def test_evaluators_stay_on_the_drivers_node_when_it_holds_them() -> None:
    nodes = [Node("head", {"CPU": 2.0}), Node("other", {"CPU": 8.0})]
    assert evaluator_home(nodes, _cpu(2), "head") == "head"
    assert evaluator_home(nodes, _cpu(3), "head") is None  # too small: Ray places them
    assert capacity_problem(nodes, _cpu(3), STREAM_CPUS, None) is None
    gpus = device_plan("triton", {"GPU": 2.0}, 1)
    assert evaluator_home([Node("head", {"CPU": 2.0, "GPU": 2.0})], gpus, "head") is None  # on their devices


def test_device_evaluators_hold_no_cpu_but_streams_need_one_somewhere() -> None:
    gpus = device_plan("triton", {"GPU": 2.0}, 1)
    assert capacity_problem([Node("a", {"CPU": 0.0, "GPU": 2.0}), Node("b", {"CPU": 1.0})], gpus, STREAM_CPUS) is None
    problem = _one_line(capacity_problem([Node("a", {"CPU": 0.0, "GPU": 2.0})], gpus, STREAM_CPUS))
    assert "no node has the 0.25 CPU a stream needs" in problem


def test_a_simulated_stream_needs_a_whole_cpu_on_one_node() -> None:
    halves = [Node("a", {"CPU": 0.5}), Node("b", {"CPU": 0.5})]
    assert "no node has the 1 CPU" in _one_line(capacity_problem(halves, None, SIMULATED_STREAM_CPUS))
    assert capacity_problem([Node("a", {"CPU": 1.0})], None, SIMULATED_STREAM_CPUS) is None


def test_only_live_nodes_count() -> None:
    nodes = alive_nodes([{"NodeID": "a", "Alive": True, "Resources": {"CPU": 2}},
                         {"NodeID": "b", "Alive": False, "Resources": {"CPU": 8}}])
    assert nodes == [Node("a", {"CPU": 2.0})]


def test_a_waiting_stream_says_why() -> None:
    assert waiting_reason(0.0, 1.0, 1.0, STREAM_CPUS) == "waiting for a CPU: evaluators hold 1 of 1, running streams 0"
    assert waiting_reason(0.0, 2.0, 1.0, STREAM_CPUS).endswith("running streams 1")
    assert "worker to start" in waiting_reason(0.5, 2.0, 1.0, STREAM_CPUS)
    snapshot = {"detail": {}, "done": {}, "workers": {"sage": 11, "none": 12, "uniform": 13},
                "nodes": {"sage": "head", "none": "lost", "uniform": "head"}}
    waiting = waiting_streams(snapshot, ["sage", "none", "later"], alive={"head"})
    assert waiting == {"none": "its node was lost, to run again elsewhere: ", "later": ""}


def test_the_display_says_a_waiting_streams_reason_as_progress(caplog: pytest.LogCaptureFixture) -> None:
    display = Display(Console(file=open("/dev/null", "w")), {"sage": 2, "none": 2})  # noqa: SIM115
    snapshot = {"detail": {"sage": "l1_relu round 1/2 draft"}, "done": {}, "workers": {"sage": 1}, "nodes": {}}
    with caplog.at_level(logging.INFO, logger="kernelsage.events"):
        display.show(snapshot, (1, 1), {"none": "waiting for a CPU: evaluators hold 1 of 1, running streams 0.25"})
        display.show(snapshot, (1, 1), {"none": "waiting for a CPU: evaluators hold 1 of 1, running streams 0.25"})
    lines = [r.getMessage() for r in caplog.records]
    assert lines.count("none: waiting for a CPU: evaluators hold 1 of 1, running streams 0.25") == 1  # said once
    assert "sage: l1_relu round 1/2 draft" in lines


def test_where_a_stream_runs_is_said_when_it_starts_and_when_it_moves() -> None:
    first = {"detail": {}, "done": {}, "workers": {"sage": 11}, "nodes": {"sage": "a" * 56}}
    (placed,) = progress_events({}, first, {"sage": 2})
    assert (placed.name, placed.fields["node"], placed.fields["pid"]) == ("placed", "a" * 56, 11)
    assert progress_events(first, first, {"sage": 2}) == []  # said once
    moved = {**first, "workers": {"sage": 12}, "nodes": {"sage": "b" * 56}}
    (again,) = progress_events(first, moved, {"sage": 2})
    assert again.message == f"sage: running again (it ran on node {'a' * 12} before) on node {'b' * 12}"


def test_what_the_cluster_lost_is_said_in_one_line() -> None:
    import ray

    errors = ray.exceptions
    node = cluster_failure(ray, errors.NodeDiedError("node 1 died"), run_id="r1")
    assert isinstance(node, ClusterError) and "a node" in str(node) and "--run-id r1" in str(node)
    inside = errors.RayTaskError("run_stream_job", "traceback", errors.ActorDiedError())
    assert "one of the run's actors" in str(cluster_failure(ray, inside, run_id="r1"))
    assert "worker" in str(cluster_failure(ray, errors.WorkerCrashedError(), run_id="r1"))
    assert all("\n" not in str(cluster_failure(ray, e, run_id="r"))
               for e in (errors.ObjectLostError("00" * 28, "owner", "call site"), errors.OutOfMemoryError("oom")))
    own = errors.RayTaskError("f", "traceback", ValueError("a bug")).as_instanceof_cause()
    assert cluster_failure(ray, own, run_id="r1") is None  # the run's own error stays itself
    assert cluster_failure(ray, errors.TaskCancelledError(), run_id="r1") is None
    assert cluster_failure(ray, ValueError("x"), run_id="r1") is None


@pytest.mark.slow
def test_a_local_cluster_of_one_cpu_is_refused_at_once(database_url: str, tmp_path: Path) -> None:
    """`--ray local --ray-cpus 1` with the cpu backend: the evaluator takes the only CPU; the command says so
    and ends 2 before any stream starts (no model listens: none is called)."""
    ray_tmp = tempfile.mkdtemp(prefix="ks-cap-")  # short: Ray's socket paths live under it
    started = time.monotonic()
    result = kernelsage([*compare_args("cap", "cap", order_file(tmp_path)), "--ray", "local", "--ray-cpus", "1"],
                        env(database_url, "http://127.0.0.1:9/v1", tmp_path, RAY_TMPDIR=ray_tmp), tmp_path,
                        timeout=120)
    elapsed = time.monotonic() - started
    assert result.returncode == 2, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]  # besides run_start's line
    assert len(errors) == 1 and "no stream can start" in errors[0] and "--ray-cpus 2" in errors[0], result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == "" and elapsed < 90
    assert not (tmp_path / "runs" / "cap" / "run.json").exists()  # refused before the run began
    shutil.rmtree(ray_tmp, ignore_errors=True)


def _dies() -> None:
    import os

    os._exit(1)  # the worker's process ends under its task, as when its node is lost


@pytest.mark.slow
def test_a_stream_the_cluster_lost_past_its_retries_ends_the_command_in_one_line() -> None:
    import ray

    from kernelsage.scale.board import open_board
    from kernelsage.scale.devices import DevicePool
    from kernelsage.scale.streams import _gather, _Watch

    ray_tmp = tempfile.mkdtemp(prefix="ks-gather-")
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, _temp_dir=ray_tmp)
    try:
        watch = _Watch(board=open_board(ray), pool=ray.remote(num_cpus=0)(DevicePool).remote([]), evaluator_cpus=0.0,
                       display=Display(Console(file=open("/dev/null", "w")), {"sage": 1}))  # noqa: SIM115
        ref = ray.remote(max_retries=0)(_dies).remote()
        with pytest.raises(ClusterError) as lost:
            _gather(ray, {"sage": ref}, watch, run_id="r1")
        assert "a stream's worker" in str(lost.value) and "--run-id r1" in str(lost.value)
        assert "\n" not in str(lost.value)
    finally:
        ray.shutdown()
        shutil.rmtree(ray_tmp, ignore_errors=True)
