"""What the Ray tests share: the CLI in a subprocess, a stand-in model server, records reduced to what a
run decides (not its timings or its database ids).

The model is a local OpenAI-compatible TEST DOUBLE (tests.models.openai_server) that answers every request
with the CPU backend's ReLU kernel (a slower one when refining), after an optional delay; everything else (Ray, the database, the
compiles, the sandboxed verify and profile) is real.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from tests.graph.scripts import SLOW, candidate, example_source
from tests.models.openai_server import Reply, answer, embeddings_env

TASKS = ("l1_relu", "l1_leaky_relu")  # the ReLU answer solves the first and is a wrong result on the second


def order_file(tmp_path: Path) -> Path:
    path = tmp_path / "order.txt"
    path.write_text("\n".join(TASKS) + "\n")
    return path


class InFlight:
    """Counts the requests the stand-in server is answering at once (the most ever, and how many in all)."""

    def __init__(self) -> None:
        self.now = self.most = self.total = 0
        self.lock = threading.Lock()

    def behaviour(self, delay: float) -> Callable[[dict[str, Any]], Reply]:
        reply = answer(_kernel)

        def respond(request: dict[str, Any]) -> Reply:
            with self.lock:
                self.now += 1
                self.total += 1
                self.most = max(self.most, self.now)
            try:
                time.sleep(delay)
                return reply(request)
            finally:
                with self.lock:
                    self.now -= 1
        return respond


def _kernel(messages: list[BaseMessage]) -> AIMessage:
    """The ReLU example; a refining round gets a kernel doing six times its work, so a round measured on a
    busier moment never counts as faster and runs compare by what they decided, whatever the load."""
    prompt = next((str(m.content) for m in messages if isinstance(m, HumanMessage)), "")
    return candidate(SLOW if prompt.startswith("# Make it faster") else example_source("l1_relu"))(messages)


def shared_build_cache(tmp_path: Path) -> Path:
    """One build cache for the tests of a pytest worker (beside their temp folders): they compile the same few
    kernels, and the cache is made for processes that share it (as runs on one machine do)."""
    return tmp_path.parent / "build-cache"


def env(database_url: str, server_url: str, tmp_path: Path, **extra: str) -> dict[str, str]:
    """The command's environment: the stand-in server for the model and the embeddings (each process of a run,
    Ray's workers included, would otherwise load the local embedding model, seconds apiece on two cores)."""
    return {**os.environ, "DATABASE_URL": database_url, "HF_HUB_OFFLINE": "1", "COLUMNS": "120",
            "KERNELSAGE_MODEL_BASE_URL": server_url, "KERNELSAGE_MODEL_API_KEY": "sk-test",
            "KERNELSAGE_MODEL_ATTEMPTS": "1", "KERNELSAGE_CACHE": str(shared_build_cache(tmp_path)),
            **embeddings_env(server_url), **extra}


def compare_args(run_id: str, namespace: str, order: Path, policies: str = "sage,none",
                 budget: int = 1) -> list[str]:
    return ["compare", "--policies", policies, "--model", "openai:test-model", "--order", f"file:{order}",
            "--budget", str(budget), "--run-id", run_id, "--namespace", namespace, "--json"]


def kernelsage(args: list[str], environment: dict[str, str], cwd: Path,
               timeout: float = 420) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kernelsage", *args], capture_output=True, text=True,
                          env=environment, cwd=cwd, timeout=timeout, stdin=subprocess.DEVNULL)


def decided(run_dir: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Per policy, what each episode decided, in stream order. Not what follows the timings: seconds,
    latencies, credits, and which items a refining round retrieves (its query carries the measured speed-up);
    nor the run id or the ids each run's own copy of the memory gave its items."""
    from kernelsage.evals.records import read_records

    found: dict[str, list[tuple[Any, ...]]] = {}
    for path in sorted(run_dir.glob("*.jsonl")):
        records = sorted(read_records(path), key=lambda r: r.position)
        found[path.stem] = [(r.position, r.task_id, r.solved, r.rounds, r.candidates, r.compiled, r.failure,
                             tuple(a.status for a in r.attempts),
                             tuple((e.round, str(e.tier), e.adopted) for e in r.adoption),
                             r.memory.updated, len(r.memory.new_items),
                             r.memory_after.by_state if r.memory_after else None)
                            for r in records]
    return found


def summary_counts(stdout: str) -> dict[str, tuple[int, int, int, int]]:
    """The --json summary's counts per policy (execution rate and compile rate: n and total)."""
    summary = json.loads(stdout)["summary"]
    return {p: (s["overall"]["er"]["n"], s["overall"]["er"]["total"], s["overall"]["cr"]["n"],
                s["overall"]["cr"]["total"]) for p, s in summary.items()}


def stream_workers(driver: int | None = None) -> dict[int, str]:
    """Ray worker processes running a stream now (Ray titles a busy worker with its task's name); with
    `driver`, only those of the cluster that driver process started (other runs may share the machine)."""
    import psutil

    found = {}
    for process in psutil.process_iter(["pid", "cmdline"]):
        line = " ".join(process.info["cmdline"] or [])
        if not line.startswith("ray::run_stream_job"):
            continue
        try:
            ancestors = {parent.pid for parent in process.parents()}
        except psutil.Error:
            continue
        if driver is None or driver in ancestors:
            found[process.info["pid"]] = line
    return found


def run_watching_streams(args: list[str], environment: dict[str, str], cwd: Path,
                         timeout: float = 420) -> tuple[subprocess.CompletedProcess[str], int]:
    """Run the CLI, counting how many stream workers were running at once (the most seen)."""
    driver = subprocess.Popen([sys.executable, "-m", "kernelsage", *args], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=environment, cwd=cwd, stdin=subprocess.DEVNULL)
    most, outputs = 0, {}

    def drain() -> None:
        outputs["out"], outputs["err"] = driver.communicate(timeout=timeout)

    reader = threading.Thread(target=drain)
    reader.start()
    while reader.is_alive():
        most = max(most, len(stream_workers(driver.pid)))
        time.sleep(0.2)
    reader.join()
    return subprocess.CompletedProcess(args, driver.returncode, outputs["out"], outputs["err"]), most
