"""Benchmark of `kernelsage memory mine` on the cpu reference kernels (tools/cpu/examples: l1_relu, l2_softmax,
l2_add_rms_norm, l3_matmul, l3_topk).

The proposals come from the labelled scripted test double, with variants WRITTEN FOR THIS BENCH (below): per
kernel, the removal of its parallel loops and of one or two kernel-specific optimizations, some of which matter
and some of which the compiler makes moot, plus one plausible but incorrect rewind. Everything else is real: each
variant is compiled, verified and profiled isolated, the original profiled right after it, and the kept lessons
are stored in a throwaway namespace of the database (DATABASE_URL, else the embedded server), deleted at the end
unless --keep. Prints one row per kernel (proposed, judged correct, kept, each lesson's gain with its interval, the
discards and why), then as its last line one JSON object with the same figures and the machine's load.
Not a test: the gains move with the load (printed with them); on 2 busy cores parallel loops buy little.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from langchain_core.messages import BaseMessage
from rich.console import Console
from rich.table import Table

from kernelsage.memory_backend.embeddings import make_embeddings
from kernelsage.memory_backend.store import MemoryStore
from kernelsage.mining.ledger import Ledger
from kernelsage.mining.proposals import Variant, render_variants
from kernelsage.mining.run import Miner
from kernelsage.mining.sources import backend_examples
from kernelsage.models.scripted import ScriptedChatModel
from kernelsage.tasks.loaders import load_suite
from kernelsage.tools.cpu.backend import CpuBackend

KERNELS = ("l1_relu", "l2_softmax", "l2_add_rms_norm", "l3_matmul", "l3_topk")


def serial(source: str) -> str:
    return "\n".join(line for line in source.splitlines() if "#pragma omp" not in line) + "\n"


def edit(source: str, old: str, new: str) -> str:
    if old not in source:
        raise SystemExit(f"the bench's variant no longer applies: {old!r} is not in the kernel (update the bench)")
    return source.replace(old, new)


def _ijk(source: str) -> str:
    """The matmul in i-j-k order: a dot product per output element, reading b by columns."""
    start = source.index("    #pragma omp parallel for")
    end = source.index("    return 0;")
    body = ("    #pragma omp parallel for schedule(static)\n    for (int64_t i = 0; i < m; ++i)\n"
            "        for (int64_t j = 0; j < n; ++j) {\n            float acc = 0.f;\n"
            "            for (int64_t p = 0; p < k; ++p) acc += a[i * k + p] * b[p * n + j];\n"
            "            c[i * n + j] = acc;\n        }\n")
    return source[:start] + body + source[end:]


PARALLEL = ("OpenMP parallel loops", "Splits the independent iterations (elements or rows) over the cores; pays "
            "when each thread gets enough work to cover the fork and join.")

# task id -> (optimization, what it does, source -> variant source), besides PARALLEL
REWINDS: dict[str, list[tuple[str, str, Callable[[str], str]]]] = {
    "l1_relu": [
        ("branch-free select", "A conditional select instead of a branch lets the loop vectorise.",
         lambda s: edit(s, "y[i] = x[i] > T(0) ? x[i] : T(0);", "if (x[i] > T(0)) y[i] = x[i]; else y[i] = T(0);")),
        ("negatives only", "Writing only the elements that change saves stores (incorrect: the output starts "
         "undefined).", lambda s: edit(s, "y[i] = x[i] > T(0) ? x[i] : T(0);", "if (x[i] > T(0)) y[i] = x[i];")),
    ],
    "l2_softmax": [
        ("hoisted reciprocal", "One division per row, then a multiplication per element, instead of a division "
         "per element.", lambda s: edit(edit(s, "        const float inverse = 1.0f / total;\n", ""),
                                         "out[j] *= inverse;", "out[j] /= total;")),
        ("fused exponent and sum", "Summing while writing the exponentials saves a pass over the row.",
         lambda s: edit(s, "            out[j] = std::exp(in[j] - top);\n            total += out[j];\n",
                        "            out[j] = std::exp(in[j] - top);\n        }\n"
                        "        for (int64_t j = 0; j < n; ++j) {\n            total += out[j];\n")),
    ],
    "l2_add_rms_norm": [
        ("fused add and square", "Adding the residual and accumulating squares in one pass reads each row once.",
         lambda s: edit(s, "            sum[base + j] = s;\n            squares += (double)s * s;\n        }\n",
                        "            sum[base + j] = s;\n        }\n        for (int64_t j = 0; j < n; ++j) {\n"
                        "            const float s = sum[base + j];\n            squares += (double)s * s;\n"
                        "        }\n")),
        ("hoisted row scale", "The row's 1/sqrt is computed once, not per element.",
         lambda s: edit(s, "normed[base + j] = sum[base + j] * scale * weight[j];",
                        "normed[base + j] = sum[base + j] / std::sqrt((float)(squares / n) + eps) * weight[j];")),
    ],
    "l3_matmul": [
        ("k-i-j loop order", "Streaming contiguous rows of b and c in the inner loop vectorises it; the i-j-k "
         "order walks b by columns.", _ijk),
        ("k blocking", "Blocks of 64 rows of b keep a block in cache across the row's updates.",
         lambda s: edit(s, "        for (int64_t p0 = 0; p0 < k; p0 += kBlock) {\n"
                           "            const int64_t p1 = p0 + kBlock < k ? p0 + kBlock : k;\n"
                           "            for (int64_t p = p0; p < p1; ++p) {\n",
                        "        {\n            for (int64_t p = 0; p < k; ++p) {\n")),
    ],
    "l3_topk": [
        ("partial sort", "std::partial_sort orders only the k largest: O(n log k) instead of a full sort.",
         lambda s: edit(s, "std::partial_sort(order.begin(), order.begin() + k, order.end(),",
                        "std::sort(order.begin(), order.end(),")),
        ("per-thread index buffer", "One index buffer per thread, reused across rows, avoids an allocation per "
         "row.", lambda s: edit(edit(s, "        std::vector<int64_t> order(n);\n", ""),
                                "            const float* row = x + r * n;\n",
                                "            const float* row = x + r * n;\n            std::vector<int64_t> order(n);\n")),
    ],
}


def bench_variants(task_id: str, source: str) -> list[Variant]:
    rewinds = [(PARALLEL[0], PARALLEL[1], serial), *REWINDS[task_id]]
    return [Variant(name, what, {"kernel.cpp": change(source)}) for name, what, change in rewinds]


def answer_for(sources: dict[str, str]) -> Callable[[list[BaseMessage]], str]:
    def answer(messages: list[BaseMessage]) -> str:
        prompt = str(messages[-1].content)
        task_id = next(t for t in KERNELS if f"Task {t} " in prompt)
        return render_variants(bench_variants(task_id, sources[task_id]))
    return answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=100, help="timed calls per profile (the backend's default; at 30 "
                        "the intervals on a loaded machine were too wide to keep a 2x slowdown)")
    parser.add_argument("--keep", action="store_true", help="keep the namespace with the lessons")
    parser.add_argument("--kernels", default=",".join(KERNELS))
    options = parser.parse_args()
    chosen = options.kernels.split(",")
    kernels = [k for k in backend_examples("cpu", ("kernel.cpp",)) if k.task_id in chosen]
    tasks = {t.id: t for t in load_suite("builtin", task_ids=chosen).tasks}
    model = ScriptedChatModel([answer_for({k.task_id: k.files["kernel.cpp"] for k in kernels})] * len(kernels))
    namespace = f"mining-bench-{uuid.uuid4().hex[:8]}"
    load_before = os.getloadavg()
    started = time.perf_counter()
    backend = CpuBackend(reps=options.reps)
    store = MemoryStore.connect(os.environ.get("DATABASE_URL"))
    try:
        memory = store.open(namespace, embeddings=make_embeddings())
        ledger = Ledger(Path(f"/tmp/{namespace}.json"), backend="cpu", namespace=namespace)
        report = Miner(backend=backend, model=model, memory=memory, ledger=ledger, variants=3,
                       on_event=lambda line: print(line, flush=True)).mine(kernels, tasks)
        if not options.keep:
            store.delete_namespace(namespace)
    finally:
        backend.close()
        store.close()
    seconds = time.perf_counter() - started
    table = Table(title=f"mining the cpu reference kernels ({options.reps} timed calls per profile)")
    for column in ("kernel", "proposed", "correct", "kept", "lessons: slower without it [~95%]", "discarded: why"):
        table.add_column(column)
    for kernel in report.kernels:
        table.add_row(kernel.task_id, str(kernel.proposed), str(kernel.correct), str(len(kernel.kept)),
                      "\n".join(f"{v.optimization}: {v.judgement.gain}" for v in kernel.kept) or "-",
                      "\n".join(f"{v.optimization}: {v.judgement.reason}" for v in kernel.discarded) or "-")
    Console(width=160).print(table)
    print(json.dumps({"reps": options.reps, "seconds": round(seconds, 1), "load_before": load_before,
                      "load_after": os.getloadavg(), "cpus": os.cpu_count(), **report.to_dict()}))


if __name__ == "__main__":
    main()
