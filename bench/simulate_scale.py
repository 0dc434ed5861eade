"""The simulator as the memory's load test: one long simulated stream (the stochastic stand-in generator, no
model) on a fresh embedded PostgreSQL + pgvector, with retrieval, commit and consolidation latencies recorded
as the memory grows. Prints a table per stretch of the stream, then one JSON object as the last line.
Not a test: figures, not assertions.

    nice -n 10 .venv/bin/python bench/simulate_scale.py --episodes 10000 --seed-items 40000
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from kernelsage.evals.metrics import metrics_of
from kernelsage.evals.simulator.measures import latency_table
from kernelsage.evals.simulator.run import StreamSpec, run_stream
from kernelsage.memory_backend.database import open_pool
from kernelsage.memory_backend.embedded import embedded_database_url
from kernelsage.memory_backend.store import MemoryStore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--seed-items", type=int, default=40_000, help="starting items besides the knowledge pack")
    parser.add_argument("--policy", default="sage")
    parser.add_argument("--order", default="mixed")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stretches", type=int, default=10, help="rows per phase in the latency table")
    parser.add_argument("--progress-every", type=int, default=1000, help="print partial figures every N episodes")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="ks-simulate-scale-") as data:
        Path(data).chmod(0o755)  # the embedded server may run as another user
        store = MemoryStore(open_pool(embedded_database_url(Path(data) / "pgdata")), owns_pool=True)
        spec = StreamSpec(policy=args.policy, order=args.order, seed=args.seed, episodes=args.episodes,
                          extra_seed_items=args.seed_items, keep_adoption=False, checkpoints=args.stretches,
                          keep_namespace=True)  # the whole server is thrown away; deleting is not measured
        start = time.perf_counter()

        def report(done: int, truth) -> None:  # partial figures, in case a long run is stopped
            if done % args.progress_every == 0:
                recent = [e for e in truth.latencies if e[1] != "add_items"][-4 * args.progress_every:]
                print(json.dumps({"episodes_done": done, "elapsed_s": round(time.perf_counter() - start, 1),
                                  "items": truth.items, "recent": latency_table(recent, 1)}), flush=True)

        result = run_stream(store, spec, on_episode=report)
        seconds = time.perf_counter() - start
        store.close()

    seeding = [ms for _, phase, ms in result.truth.latencies if phase == "add_items"]
    streaming = [entry for entry in result.truth.latencies if entry[1] != "add_items"]
    rows = latency_table(streaming, args.stretches)
    table = Table(title=f"{args.policy}, {args.order}, {args.episodes} episodes, {seconds:.0f} s "
                        f"({sum(seeding) / 1000:.0f} s of them storing the {args.seed_items:,} starting items)")
    for column in ("phase", "calls", "items at end", "p50 ms", "p95 ms", "p99 ms", "max ms"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(row["phase"], str(row["calls"]), f"{row['items_at_end']:,}",
                      *(f"{row[k]:.1f}" for k in ("p50", "p95", "p99", "max")))
    Console().print(table)
    metrics = metrics_of(result.records)
    print(json.dumps({"episodes": args.episodes, "seconds": round(seconds, 1),
                      "seeding_seconds": round(sum(seeding) / 1000, 1),
                      "seconds_per_episode": round((seconds - sum(seeding) / 1000) / args.episodes, 3),
                      "items_at_start": args.seed_items,
                      "items_at_end": result.truth.items, "er": metrics.er.value, "fast1": metrics.fast1.value,
                      "hot_rules_at_end": len(result.hot_values), "load_average": os.getloadavg(),
                      "latency": rows}))


if __name__ == "__main__":
    main()
