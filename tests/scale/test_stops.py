"""What the driver of a Ray run says when the model stopped a stream, and the records it keeps (no cluster
needed: these are the driver's own rules)."""

from __future__ import annotations

from pathlib import Path

from kernelsage.evals.experiment import Experiment
from kernelsage.evals.records import EpisodeRecord
from kernelsage.scale.streams import StreamOutcome, _first_stop, _kept


def _record(policy: str, position: int) -> EpisodeRecord:
    return EpisodeRecord(task_id=f"t{position}", episode_id=f"r/{policy}:{position}:t{position}", level=1,
                         solved=False, rounds=1, candidates=1, compiled=0, failure="model_error: down",
                         run_id=f"r/{policy}", policy=policy, model="m", backend="cpu", namespace="n",
                         position=position)


def test_the_first_stopped_policy_names_the_streams_it_left_unfinished(tmp_path: Path) -> None:
    experiment = Experiment(run_id="r", run_dir=tmp_path, model="openai:m", policies=["sage", "uniform", "none"])
    outcomes = {"sage": StreamOutcome([_record("sage", 0)] * 3, None),
                "uniform": StreamOutcome([_record("uniform", 0)] * 3, "the model failed 3 episodes in a row")}
    results = {"sage": outcomes["sage"].records, "uniform": outcomes["uniform"].records, "none": []}
    stop = _first_stop(experiment, outcomes, results, operators=3)
    assert stop is not None and stop.policy == "uniform" and stop.not_run == ["none"]
    assert _first_stop(experiment, {"sage": outcomes["sage"]}, results, operators=3) is None


def test_the_driver_keeps_records_a_worker_wrote_elsewhere_once(tmp_path: Path) -> None:
    experiment = Experiment(run_id="r", run_dir=tmp_path, model="openai:m", policies=["sage"])
    records = [_record("sage", 0), _record("sage", 1)]
    experiment.records_path("sage").write_text(records[0].model_dump_json() + "\n")  # the worker's first line
    assert _kept(experiment, "sage", StreamOutcome(records, None)) == records
    lines = experiment.records_path("sage").read_text().splitlines()
    assert [EpisodeRecord.model_validate_json(line).position for line in lines] == [0, 1]
    assert _kept(experiment, "sage", None) == records  # a cancelled stream: what its file holds
