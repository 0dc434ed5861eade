"""Task streams: ordering, resuming an interrupted stream exactly once, identical starting memories, tasks the
harness cannot run."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest
from tests.graph.fakes import fake_embeddings
from tests.graph.scripts import SLOW, candidate, example_source

from kernelsage.errors import ConfigurationError
from kernelsage.evals.experiment import Experiment, prepare_memories
from kernelsage.evals.stream import (
    StreamSettings,
    cases_path,
    checkpointed,
    is_harness_error,
    order_tasks,
    run_stream,
    stream_entries,
)
from kernelsage.graph import Context, build_graph
from kernelsage.memory_backend.store import MemoryStore
from kernelsage.memory_backend.transfer import export_jsonl
from kernelsage.models.scripted import ScriptedChatModel
from kernelsage.tasks.loaders import find_task, load_suite

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_stream_orders(suite, tmp_path: Path) -> None:
    tasks = suite.tasks
    curriculum = order_tasks(tasks, "curriculum")
    assert [t.level for t in curriculum] == sorted(t.level for t in tasks)
    mixed = order_tasks(tasks, "mixed", seed=3)
    assert sorted(t.id for t in mixed) == sorted(t.id for t in tasks) and mixed != curriculum
    assert mixed == order_tasks(tasks, "mixed", seed=3)
    assert {t.level for t in order_tasks(tasks, "level:3")} == {3}
    order = tmp_path / "order.txt"
    order.write_text("l3_matmul  # hard first\nl1_relu\n")
    assert [t.id for t in order_tasks(tasks, f"file:{order}")] == ["l3_matmul", "l1_relu"]
    order.write_text("l9_nothing\n")
    with pytest.raises(ConfigurationError, match=r"unknown task ids \['l9_nothing'\]"):
        order_tasks(tasks, f"file:{order}")
    with pytest.raises(ConfigurationError, match="unknown order"):
        order_tasks(tasks, "alphabetical")


def test_an_interrupted_stream_resumes_and_applies_memory_effects_once(
    store: MemoryStore, cpu_backend, suite, seeded, database_url: str, namespace: str, tmp_path: Path
) -> None:
    def crash(messages):
        raise RuntimeError("machine lost")

    def with_usage(messages):  # as a real model reports it
        answer = candidate(SLOW)(messages)
        return answer.model_copy(update={"usage_metadata": {"input_tokens": 1200, "output_tokens": 300,
                                                            "total_tokens": 1500}})

    tasks = [find_task(suite, "l1_relu"), find_task(suite, "l1_add")]
    model = ScriptedChatModel([with_usage, crash, candidate(SLOW.replace("> 0.f ? x[i] : 0.f", "+ 0.f"))])
    builder = build_graph(models=model, backend=cpu_backend, tasks=partial(find_task, suite), memory_store=store,
                          embeddings=fake_embeddings())
    settings = StreamSettings(run_id="resume", policy="sage", namespace=namespace, model="scripted", backend="cpu",
                              budget=1)
    records_path = tmp_path / "sage.jsonl"
    memory = store.open(namespace, embeddings=fake_embeddings())
    with checkpointed(builder, database_url) as graph:
        run = partial(run_stream, graph, tasks, settings=settings, records_path=records_path,
                      context=Context(namespace=namespace, budget=1, top_k=2), memory=lambda: memory)
        with pytest.raises(RuntimeError, match="machine lost"):
            run()
        assert len(records_path.read_text().splitlines()) == 1  # the first episode was recorded
        records = run()
    assert [r.task_id for r in records] == ["l1_relu", "l1_add"]
    assert [json.loads(line)["position"] for line in records_path.read_text().splitlines()] == [0, 1]
    assert len(model.requests) == 3  # the finished episode was not run again
    assert memory.stats()["episodes"] == 2
    assert records[1].memory_after.by_state.cold == 3
    assert records[1].solved is False  # the scripted second kernel adds instead of clamping
    assert (records[0].tokens.input, records[0].tokens.output) == (1200, 300)
    assert records[1].attempts[0].evaluation.verify.cases  # the verdicts are kept for audits


def test_a_resumed_episode_counts_the_tokens_and_seconds_spent_before_the_interruption(
    store: MemoryStore, cpu_backend, suite, seeded, database_url: str, namespace: str, tmp_path: Path
) -> None:
    def crash(messages):
        raise RuntimeError("machine lost")

    def with_usage(source):
        def answer(messages):
            reply = candidate(source)(messages)
            return reply.model_copy(update={"usage_metadata": {"input_tokens": 1000, "output_tokens": 200,
                                                               "total_tokens": 1200}})
        return answer

    # Round 1 writes a correct kernel; the optimizer's call of round 2 is lost with the machine, then answered.
    lessons = ["Write the clamp as one pass over the tensor."] * 3  # the curator's lesson extraction, no usage
    model = ScriptedChatModel([with_usage(SLOW), crash, with_usage(example_source("l1_relu")), *lessons])
    builder = build_graph(models=model, backend=cpu_backend, tasks=partial(find_task, suite), memory_store=store,
                          embeddings=fake_embeddings())
    settings = StreamSettings(run_id="spend", policy="sage", namespace=namespace, model="scripted", backend="cpu",
                              budget=2)
    records_path = tmp_path / "sage.jsonl"
    with checkpointed(builder, database_url) as graph:
        run = partial(run_stream, graph, [find_task(suite, "l1_relu")], settings=settings, records_path=records_path,
                      context=Context(namespace=namespace, budget=2, top_k=2), memory=lambda: None)
        with pytest.raises(RuntimeError, match="machine lost"):
            run()
        spent = json.loads((tmp_path / "sage.spend.json").read_text())
        (before,) = spent.values()
        assert (before["input"], before["output"]) == (1000, 200) and before["seconds"] > 0
        (record,) = run()
    assert (record.tokens.input, record.tokens.output) == (2000, 400)  # both runs' calls, each once
    assert record.seconds > before["seconds"]
    assert not (tmp_path / "sage.spend.json").exists()  # forgotten once the record is written


def test_every_policy_starts_from_an_identical_copy_of_the_memory(store: MemoryStore, seeded, namespace: str,
                                                                  tmp_path: Path) -> None:
    experiment = Experiment(run_id="same-start", run_dir=tmp_path, model="scripted", namespace=namespace,
                            policies=["sage", "uniform", "static"])
    prepare_memories(store, experiment, fake_embeddings(), "cpu")
    exported = []
    for policy in experiment.policies:
        path = tmp_path / f"{policy}.jsonl"
        export_jsonl(store, experiment.policy_namespace(policy), path)
        lines = [r for r in map(json.loads, path.read_text().splitlines()) if r["type"] != "end"]
        exported.append([{k: v for k, v in r.items() if k not in ("id", "name", "created_at", "updated_at")}
                         for r in lines])
    assert exported[0] == exported[1] == exported[2]
    assert len(exported[0]) == 1 + len(seeded)
    with pytest.raises(ConfigurationError, match="unknown memory policies"):
        Experiment(run_id="x", run_dir=tmp_path, model="m", policies=["sage", "magic"])


NPU_ONLY = '''import torch
import torch_npu


class Model(torch.nn.Module):
    def forward(self, x):
        return torch_npu.npu_fast_gelu(x)


def get_inputs():
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
'''


def test_tasks_the_harness_cannot_run_are_recorded_and_the_stream_goes_on(
    store: MemoryStore, cpu_backend, suite, database_url: str, namespace: str, tmp_path: Path
) -> None:
    level = tmp_path / "suite" / "level1"
    level.mkdir(parents=True)
    (level / "8_Broken.py").write_text("import torch\n\ndef get_inputs(:\n")
    (level / "9_Npu_Only.py").write_text(NPU_ONLY)
    entries = stream_entries(load_suite(tmp_path / "suite", "kernelbench"))
    assert [(e.id, type(e).__name__) for e in entries] == [("level1/8_Broken", "UnloadableTask"),
                                                           ("level1/9_Npu_Only", "Task")]
    # A task the episode's graph does not know: its start node fails on it.
    stranger = find_task(load_suite(FIXTURES / "kernelbench"), "level1/1_Scaled_Tanh")
    tasks = [*entries, stranger, find_task(suite, "l1_relu")]
    model = ScriptedChatModel([candidate(SLOW)])
    builder = build_graph(models=model, backend=cpu_backend, tasks=partial(find_task, suite), memory_store=store,
                          embeddings=fake_embeddings())
    settings = StreamSettings(run_id="harness", policy="sage", namespace=namespace, model="scripted",
                              backend="cpu", budget=1)
    records_path = tmp_path / "sage.jsonl"
    memory = store.open(namespace, embeddings=fake_embeddings())
    with checkpointed(builder, database_url) as graph:
        run = partial(run_stream, graph, tasks, settings=settings, records_path=records_path,
                      context=Context(namespace=namespace, budget=1, top_k=2), memory=lambda: memory)
        records = run()
        # Three harness errors in a row say nothing about the model: the stream went on to run l1_relu.
        assert [is_harness_error(r) for r in records] == [True, True, True, False]
        assert records[3].attempts[0].evaluation.verify.correct
        assert "SyntaxError" in records[0].failure and "npu_fast_gelu" in records[1].failure
        assert "unknown task 'level1/1_Scaled_Tanh'" in records[2].failure
        assert all(r.rounds == 0 and not r.attempts and not r.memory.updated for r in records[:3])
        assert memory.stats()["episodes"] == 1  # only the episode that ran touched the memory
        again = run()  # resuming finds every record: nothing runs again, nothing loops
    assert [r.episode_id for r in again] == [r.episode_id for r in records]
    assert len(records_path.read_text().splitlines()) == 4 and model.remaining == 0
    shapes = json.loads(cases_path(records_path).read_text())
    assert shapes["l1_relu"]["cases"][0]["inputs"][0]["shape"] and "level1/8_Broken" not in shapes
    assert shapes["level1/9_Npu_Only"]["cases"][0]["error"].startswith("NpuUnavailable")
