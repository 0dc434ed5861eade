"""`kernelsage doctor`: is everything a run needs here? Each check says its status and what to do."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass

import typer
from rich.markup import escape
from rich.table import Table

from kernelsage.cli.common import JsonOption, console, print_json


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # ok | warn | fail
    detail: str
    fix: str = ""


def check_isolation() -> Check:
    """How candidates are isolated here (docs/security.md), and what to do when they cannot be."""
    from kernelsage.tools.isolation import UNSAFE_ENV, detect, unsafe_requested

    isolation = detect()
    if isolation.available:
        return Check("isolation", "ok", isolation.describe())
    fix = ("install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; scripts/install.sh does it when run as "
           "root) and allow unprivileged user namespaces; until then `check`, `eval` and `run` refuse candidates")
    if unsafe_requested():
        return Check("isolation", "warn", f"UNSAFE: {UNSAFE_ENV}=1 is set, so candidates run unisolated. "
                     + isolation.describe(), fix)
    return Check("isolation", "fail", isolation.describe(), fix)


def check_backend() -> Check:
    compiler = shutil.which("g++")
    if compiler is None:
        return Check("cpu backend", "fail", "no g++ on PATH", "install a C++17 compiler with OpenMP (e.g. apt install g++)")
    from kernelsage.tools.backend import get_backend
    from kernelsage.tools.results import Candidate

    probe = '#include "kernelsage_cpu.h"\nint ks_kernel(const ks_tensor* i, int a, ks_tensor* o, int b, ' \
            'const ks_attr* t, int c) { return 0; }\n'
    with get_backend("cpu") as backend:
        result = backend.compile(Candidate(task_id="doctor", files={"kernel.cpp": probe}))
        level = backend.isolation.level
    if not result.ok:
        return Check("cpu backend", "fail", f"a trivial kernel did not build: {result.status.value}",
                     "check that g++ supports -fopenmp and -march=native")
    return Check("cpu backend", "ok", f"{compiler}, build isolated by {level} in {result.seconds:.2f} s")


def check_database() -> Check:
    from kernelsage.memory_backend.database import database_url, redact
    from kernelsage.memory_backend.store import MemoryStore

    where = "DATABASE_URL" if os.environ.get("DATABASE_URL") else "embedded server"
    with MemoryStore.connect() as store, store.pool.connection() as conn:
        version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        server = conn.execute("SHOW server_version").fetchone()
        namespaces = len(store.list_namespaces())
    return Check("memory database", "ok", f"{where} {redact(database_url())}: PostgreSQL {server['server_version']}, "
                 f"pgvector {version['extversion']}, {namespaces} namespaces")


def check_embeddings() -> Check:
    from kernelsage.memory_backend.embeddings import embedding_name, make_embeddings

    embeddings = make_embeddings()
    dimension = len(embeddings.embed_query("kernelsage doctor"))
    return Check("embeddings", "ok", f"{embedding_name(embeddings)}, dimension {dimension}")


def check_model() -> Check:
    from kernelsage.models.factory import model_name
    from kernelsage.models.spec import model_from_spec

    spec = os.environ.get("KERNELSAGE_MODEL")
    if not spec:
        return Check("chat model", "warn", "KERNELSAGE_MODEL is not set",
                     "set KERNELSAGE_MODEL=openai:<model> with KERNELSAGE_MODEL_API_KEY (and KERNELSAGE_MODEL_BASE_URL "
                     "for GLM, DeepSeek, Qwen or vLLM endpoints); `kernelsage demo` needs none")
    model = model_from_spec(spec)
    return Check("chat model", "ok", f"{model_name(model)} configured (not called: doctor sends no requests)")


def check_npu() -> Check:
    # torch_npu without the Ascend toolkit can exit the process on import: probe it in a child.
    probe = subprocess.run([sys.executable, "-c", "import torch_npu"], capture_output=True, text=True, timeout=60)
    if probe.returncode == 0:
        return Check("ascend npu", "ok", "torch_npu imports")
    return Check("ascend npu", "warn", "torch_npu is not usable here (optional)",
                 "on an Ascend machine: pip install 'kernelsage[npu]' and source the CANN set_env.sh")


CHECKS: tuple[Callable[[], Check], ...] = (check_isolation, check_backend, check_database, check_embeddings, check_model, check_npu)


def doctor(as_json: bool = JsonOption) -> None:
    """Check the isolation of candidates, the backends, the database, the embeddings and the model endpoint."""
    results = []
    for run_check in CHECKS:
        try:
            results.append(run_check())
        except Exception as exc:  # a doctor reports every failure instead of stopping at the first
            name = run_check.__name__.removeprefix("check_").replace("_", " ")
            results.append(Check(name, "fail", " ".join(str(exc).split())[:300], "see the detail"))
    if as_json:
        print_json([asdict(r) for r in results])
    else:
        table = Table(title="kernelsage doctor")
        for column in ("check", "status", "detail", "what to do"):
            table.add_column(column, overflow="fold")
        colours = {"ok": "green", "warn": "yellow", "fail": "red"}
        for r in results:
            table.add_row(r.name, f"[{colours[r.status]}]{r.status}[/]", escape(r.detail), escape(r.fix))
        console.print(table)
    if any(r.status == "fail" for r in results):
        raise typer.Exit(1)
