"""`kernelsage doctor`: is everything a run needs here? Each check says its status and what to do."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from contextlib import closing
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
    with closing(get_backend("cpu")) as backend:
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


DOCTOR_MODEL_PROMPT = "Reply with the single word: ok"
DOCTOR_MAX_TOKENS = 16
# A one-line prompt and a 16-token answer take 1-3 s on hosted endpoints and GPU servers. Past 10 s the
# endpoint works but every writing prompt (thousands of tokens in, hundreds out) will take minutes, which
# the run's limits must allow for: doctor says "slow" instead of "ok".
SLOW_ANSWER_SECONDS = 10.0


def check_model(*, offline: bool = False) -> Check:
    """The chat model answers one tiny request (one try, within KERNELSAGE_MODEL_TIMEOUT, as a run waits),
    unless `offline`; `warn` when it answers, but slower than SLOW_ANSWER_SECONDS."""
    import time

    from langchain_core.messages import HumanMessage

    from kernelsage.errors import ModelError
    from kernelsage.models.factory import make_chat_model, model_name
    from kernelsage.models.limits import ModelLimits
    from kernelsage.models.retry import invoke_with_retry
    from kernelsage.models.spec import model_from_spec

    spec = os.environ.get("KERNELSAGE_MODEL")
    if not spec:
        return Check("chat model", "warn", "KERNELSAGE_MODEL is not set",
                     "set KERNELSAGE_MODEL=openai:<model> with KERNELSAGE_MODEL_API_KEY (and KERNELSAGE_MODEL_BASE_URL "
                     "for GLM, DeepSeek, Qwen or vLLM endpoints); `kernelsage demo` needs none")
    if spec.startswith("replay:"):
        return Check("chat model", "ok", f"{model_name(model_from_spec(spec))}: replays a recording (no endpoint)")
    timeout = ModelLimits.from_env().timeout  # what a run waits: a slow server that a run can use passes
    model = make_chat_model(spec, timeout=timeout, max_tokens=DOCTOR_MAX_TOKENS)
    if offline:
        return Check("chat model", "ok", f"{model_name(model)} configured; not called (--offline)")
    started = time.perf_counter()
    try:
        invoke_with_retry(model, [HumanMessage(DOCTOR_MODEL_PROMPT)], attempts=1, deadline=timeout)
    except ModelError as exc:
        return Check("chat model", "fail", f"{model_name(model)}: {' '.join(str(exc).split())}",
                     "start the server or fix KERNELSAGE_MODEL, KERNELSAGE_MODEL_BASE_URL and KERNELSAGE_MODEL_API_KEY; "
                     "`kernelsage doctor --offline` skips this call")
    return answer_check(model_name(model), time.perf_counter() - started, timeout)


def answer_check(name: str, seconds: float, timeout: float) -> Check:
    """The model check for an answer that took `seconds`: ok, or slow (see SLOW_ANSWER_SECONDS)."""
    if seconds <= SLOW_ANSWER_SECONDS:
        return Check("chat model", "ok", f"{name} answered in {seconds:.2f} s")
    return Check("chat model", "warn",
                 f"{name} answered, but slow: {seconds:.1f} s for a {DOCTOR_MAX_TOKENS}-token answer (a normal "
                 f"answer takes under {SLOW_ANSWER_SECONDS:g} s)",
                 f"a writing prompt will take far longer: set KERNELSAGE_MODEL_TIMEOUT (now {timeout:g} s) and "
                 "KERNELSAGE_MODEL_DEADLINE to fit it, keep KERNELSAGE_MODEL_MAX_TOKENS small, or use a faster "
                 "endpoint (docs/models.md)")


def check_ascend() -> Check:
    """The ascend backend (optional): CANN, torch_npu and the NPUs, each with its reason and fix."""
    from kernelsage.tools.ascend.devices import list_npus
    from kernelsage.tools.ascend.toolchain import ToolchainProblem, detect_toolchain

    problems, fixes, found = [], [], []
    try:
        toolchain = detect_toolchain()
        found.append(f"CANN {toolchain.cann_version} at {toolchain.ascend_home} ({toolchain.bisheng_version or 'bisheng'})")
    except ToolchainProblem as exc:
        problems.append(f"CANN: {str(exc).split(': install', 1)[0]}")
        fixes.append("install the CANN toolkit and `source /usr/local/Ascend/ascend-toolkit/set_env.sh`")
    # torch_npu without CANN fails on import (or exits the process): probe it in a child, with the device
    # backend autoload off so that a broken torch_npu cannot break `import torch` there either.
    probe = subprocess.run([sys.executable, "-c", "import torch_npu; print(torch_npu.__version__)"],
                           capture_output=True, text=True, timeout=120, check=False,
                           env={**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    if probe.returncode == 0:
        found.append(f"torch_npu {probe.stdout.strip()}")
    else:
        lines = (probe.stderr.strip() or f"exit code {probe.returncode}").splitlines()
        missing = "No module named 'torch_npu'" in probe.stderr
        problems.append("torch_npu: not installed" if missing else f"torch_npu does not import: {lines[-1][:200]}")
        fixes.append("pip install -e '.[npu]' (torch-npu pinned to this torch)" if missing
                     else "source the CANN set_env.sh (torch_npu needs its libraries, e.g. libhccl.so)")
    npus, problem = list_npus()
    if npus:
        found.append(f"{len(npus)} NPU(s): " + ", ".join(f"{n.index}:{n.soc} {n.health}" for n in npus))
    else:
        problems.append(f"devices: {problem}")
        fixes.append("install the Ascend driver and firmware (npu-smi info must list the NPUs)")
    if not problems:
        return Check("ascend backend", "ok", "; ".join(found))
    detail = "unavailable (optional): " + "; ".join(problems) + (f" (found: {'; '.join(found)})" if found else "")
    return Check("ascend backend", "warn", detail, "; ".join(fixes) + "; see docs/ascend.md")


def check_triton() -> list[Check]:
    """The triton backend (optional): one line per device (interpret, cuda, npu, npu-frontend), usable or why
    not, and whether the runner's seccomp filter installs here."""
    from kernelsage.tools.isolation import detect
    from kernelsage.tools.triton.devices import DEVICES, device_status, syscall_filter_status
    from kernelsage.tools.triton.python_view import usable

    checks = []
    for device in DEVICES:
        status = device_status(device)
        problem = usable(detect()) if status.usable else ""
        ok = status.usable and not problem
        checks.append(Check(f"triton {device}", "ok" if ok else "warn",
                            status.detail if ok else f"unavailable (optional): {problem or status.detail}",
                            "" if ok else "see docs/triton.md"))
    installs, detail = syscall_filter_status()
    checks.append(Check("triton seccomp filter", "ok" if installs else "warn", detail,
                        "" if installs else "a Linux kernel with seccomp filters on x86_64 or aarch64: see docs/triton.md"))
    return checks


CHECKS: tuple[Callable[[], Check | list[Check]], ...] = (
    check_isolation, check_backend, check_database, check_embeddings, check_model, check_ascend, check_triton,
)


def ascend_build_checks() -> list[Check]:
    """What an Ascend build would use here (paths, libraries, SoC), one check per item, before any kernel."""
    from kernelsage.tools.ascend.build_summary import build_summary

    fixes = {"fail": "see docs/ascend.md (Setting up an Ascend host)", "warn": "see docs/ascend.md"}
    return [Check(f"ascend {item.name}", item.status, item.detail, fixes.get(item.status, ""))
            for item in build_summary()]


# `--backend NAME`: only the checks that backend needs (ascend adds what its build would use).
BACKEND_CHECKS: dict[str, tuple[Callable[[], Check | list[Check]], ...]] = {
    "cpu": (check_isolation, check_backend),
    "ascend": (check_isolation, check_ascend, ascend_build_checks),
    "triton": (check_isolation, check_triton),
}


def doctor(as_json: bool = JsonOption,
           offline: bool = typer.Option(False, "--offline", help="Do not call the model endpoint."),
           backend: str | None = typer.Option(None, "--backend", help="Only what this backend needs (cpu, ascend, triton); "
                                              "ascend also lists what its builds would use.")) -> None:
    """Check the isolation of candidates, the backends, the database, the embeddings and the model endpoint
    (one tiny request, unless --offline); with --backend, only what that backend needs."""
    if backend is not None and backend not in BACKEND_CHECKS:
        raise typer.BadParameter(f"unknown backend {backend!r}: choose one of {', '.join(BACKEND_CHECKS)}",
                                 param_hint="--backend")
    results: list[Check] = []
    for run_check in BACKEND_CHECKS[backend] if backend else CHECKS:
        try:
            found = check_model(offline=offline) if run_check is check_model else run_check()
            results.extend(found if isinstance(found, list) else [found])
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
