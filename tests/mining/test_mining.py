"""Mining against the real cpu backend, the real database and the labelled scripted test double.

The kernel is the fixture suite's relu32 with a deliberate waste (tests/fixtures/mining/kernels/relu32.cpp), so
neither verdict can be flipped by noise: the kept variant does all its work eight times (about 8x the time, where
keeping needs the intervals apart by 5%), and the discarded "not slower" variant drops the waste, which makes it
several times FASTER than the original (being kept would need it clearly slower)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelsage.memory_backend.store import MemoryStore
from kernelsage.mining.ledger import Ledger
from kernelsage.mining.proposals import Variant, render_variants
from kernelsage.mining.run import Miner
from kernelsage.mining.sources import from_folder
from kernelsage.models.scripted import ScriptedChatModel
from kernelsage.tasks.loaders import find_task, load_suite
from kernelsage.tools.backend import KernelBackend, get_backend
from tests.graph.fakes import fake_embeddings
from tests.memory.helpers import commit, episode

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
KERNELS = FIXTURES / "mining" / "kernels"
CALL = "    warm(x, n);\n    relu(x, (float*)outputs[0].data, n);\n"


def variants(original: str) -> list[Variant]:
    """The rewinds the scripted double proposes: one slower, one faster, one wrong, one that does not build."""
    def file(text: str) -> dict[str, str]:
        assert text != original
        return {"kernel.cpp": text}

    repeated = original.replace(CALL, "    for (int pass = 0; pass < 8; ++pass) {\n" + CALL + "    }\n")
    return [
        Variant("single pass", "Doing the work once instead of repeating it saves every repeated pass.",
                file(repeated)),
        Variant("warm-up pass", "Reading the input first warms the cache.", file(original.replace(
            "    warm(x, n);\n", ""))),
        Variant("branch-free select", "A select compiles to a vector max.", file(original.replace(
            "y[i] = x[i] > 0.f ? x[i] : 0.f;", "y[i] = x[i];"))),
        Variant("static schedule", "Static chunks avoid scheduling overhead.", file(original.replace(
            "return 0;", "return 0"))),
    ]


@pytest.fixture(scope="module")
def judge() -> Iterator[KernelBackend]:
    """The backend's default 100 timed calls: at the session fixture's 20, the reference's median interval (it
    runs 0.1 ms here) was 4x wide on a loaded machine, and the ratio of four intervals could not separate 8x."""
    backend = get_backend("cpu", trials=2)
    yield backend
    backend.close()


@pytest.fixture
def relu_kernel() -> list:
    return from_folder(KERNELS, ("kernel.cpp",))


@pytest.fixture
def tasks() -> dict:
    return {"relu32": find_task(load_suite(FIXTURES / "suite"), "relu32")}


def test_mining_keeps_only_removals_that_measurably_slow_a_correct_kernel(
        store: MemoryStore, namespace: str, judge: KernelBackend, relu_kernel: list, tasks: dict,
        tmp_path: Path) -> None:
    original = relu_kernel[0].files["kernel.cpp"]
    model = ScriptedChatModel([render_variants(variants(original))])
    memory = store.open(namespace, embeddings=fake_embeddings())
    ledger_path = tmp_path / "mining.json"
    lines: list[str] = []
    miner = Miner(backend=judge, model=model, memory=memory, variants=4, on_event=lines.append,
                  ledger=Ledger(ledger_path, backend="cpu", namespace=namespace))
    report = miner.mine(relu_kernel, tasks)

    kernel = report.kernels[0]
    assert kernel.problem == "" and kernel.proposed == 4 and report.evaluations == 1 + 4 + 2
    verdicts = {v.optimization: v.judgement for v in kernel.variants}
    assert verdicts["single pass"].kept and verdicts["single pass"].gain.low > 1.05
    assert verdicts["single pass"].gain.low <= verdicts["single pass"].gain.ratio <= verdicts["single pass"].gain.high
    assert verdicts["warm-up pass"].correct and not verdicts["warm-up pass"].kept
    assert verdicts["warm-up pass"].reason.startswith("not measurably slower")
    assert not verdicts["branch-free select"].correct and verdicts["branch-free select"].reason.startswith("incorrect")
    assert not verdicts["static schedule"].correct and "does not compile" in verdicts["static schedule"].reason
    assert len(lines) == 6 and "'single pass': kept" in lines[2]

    [item] = memory.list_items()
    assert item.kind == "experience" and item.state == "cold" and item.operator == "relu32"
    assert item.provenance == "mined" and item.metadata["optimization"] == "single pass"
    assert item.metadata["source_sha256"] == relu_kernel[0].sha256 and item.metadata["category"] == "activation"
    assert item.metadata["gain"]["low"] == pytest.approx(verdicts["single pass"].gain.low)
    assert item.code_example.startswith("--- kernel.cpp (without single pass)")
    assert "-    for (int pass = 0; pass < 8; ++pass) {" in item.code_example  # slow -> fast
    assert "single pass" in item.text and "x slower" in item.text and "interval" in item.evidence
    assert memory.stats()["by_provenance"] == {"mined": 1}
    # an ordinary cold item from here on: retrieved, shown, and credited by ATU when adopted
    assert [shown.item.id for shown in memory.retrieve(item.text).cold] == [item.id]
    commit(memory, episode("e1", "relu32", [item.id], [item.id]))
    credited = memory.get_item(item.id)
    assert credited.n_ado == 1 and credited.utility > 0

    # A rerun of the same run: nothing asked (the script is spent), nothing judged or stored again.
    again = Miner(backend=judge, model=ScriptedChatModel([]), memory=memory,
                  ledger=Ledger(ledger_path, backend="cpu", namespace=namespace)).mine(relu_kernel, tasks)
    assert again.evaluations == 0 and [v.resumed for v in again.kernels[0].variants] == [True] * 4
    assert {v.optimization: v.judgement for v in again.kernels[0].variants} == verdicts
    assert again.kernels[0].kept[0].item_id == item.id and memory.count_items() == 1


def test_the_budget_stops_before_a_variant_that_would_exceed_it(
        store: MemoryStore, namespace: str, judge: KernelBackend, relu_kernel: list, tasks: dict,
        tmp_path: Path) -> None:
    original = relu_kernel[0].files["kernel.cpp"]
    miner = Miner(backend=judge, model=ScriptedChatModel([render_variants(variants(original)[2:])]),
                  memory=store.open(namespace, embeddings=fake_embeddings()), budget=3,
                  ledger=Ledger(tmp_path / "mining.json", backend="cpu", namespace=namespace))
    report = miner.mine(relu_kernel, tasks)
    # the original (1) and the first variant (incorrect: 1, no profile of the original beside it) fit; the second
    # could need 2 more, which 3 does not allow
    assert report.out_of_budget and report.evaluations == 2
    assert [v.optimization for v in report.kernels[0].variants] == ["branch-free select"]
    assert report.kernels[0].problem == "out of evaluation budget"
