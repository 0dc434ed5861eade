"""The cluster a command runs on: `--ray local|auto|ADDRESS` (or RAY_ADDRESS), joined or started for the
command, and the memory database every worker shares."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, redirect_stdout
from dataclasses import dataclass
from typing import Any

from kernelsage.errors import ConfigurationError, KernelsageError
from kernelsage.scale.access import (
    AUTH_MODE,
    LOOPBACK,
    checks_no_token,
    environment_setting,
    is_loopback,
    is_loopback_host,
    loopback_only,
    open_cluster_problem,
    token_refused_problem,
    token_to_send,
)
from kernelsage.scale.probe import PROBE_S, open_cluster, probe

INSTALL_HINT = "pip install 'kernelsage[ray]'"
NAMESPACE = "kernelsage"  # Ray namespace of the named actors (the model-call gates)
# What a worker must see of the driver's environment: kernelsage's settings, the model's endpoint and key, the
# database, the offline embedding model. A started local cluster inherits it anyway; a joined one does not.
FORWARDED_PREFIXES = ("KERNELSAGE_", "OPENAI_", "HF_", "TRANSFORMERS_", "LANGSMITH_", "LANGCHAIN_")
FORWARDED_NAMES = ("DATABASE_URL",)
# Ray keeps a job's runtime environment in its control store (the dashboard and the state API show it, its agent
# logs it): settings whose name says they are a credential, and the database URL (it may hold a password), travel
# instead as an argument of each stream's task, which neither shows.
SECRET_NAME_PARTS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")


def import_ray() -> Any:
    """The `ray` module, or a one-line error naming the extra that installs it."""
    try:
        import ray
    except ImportError:
        raise ConfigurationError(f"--ray needs Ray, which is not installed: {INSTALL_HINT}") from None
    return ray


@dataclass(frozen=True, kw_only=True)
class RayTarget:
    """Where the command's streams run: a local cluster started for it, or an existing one."""

    address: str  # "local", "auto" or host:port / ray://host:port
    cpus: int | None = None  # CPUs of a started local cluster (default: all of this machine's)
    insecure: bool = False  # join a cluster that checks no token (the user said so)

    @property
    def local(self) -> bool:
        return self.address == "local"


def ray_target(option: str | None, cpus: int | None = None, insecure: bool = False) -> RayTarget | None:
    """What `--ray` (else RAY_ADDRESS) names, checked without importing Ray; None: run sequentially."""
    address = (option or "").strip()
    if option is not None and not address:
        raise ConfigurationError("--ray needs a value: local, auto, or the address of a cluster (host:port)")
    if not address:
        return None
    if cpus is not None and address != "local":
        raise ConfigurationError("--ray-cpus sizes a cluster started with --ray local; a joined cluster has its own")
    if address != "local" and address != "auto" and ":" not in address:
        raise ConfigurationError(f"--ray {address}: give local, auto, or an address such as 10.0.0.1:6379 or "
                                 "ray://10.0.0.1:10001")
    if insecure and address == "local":
        raise ConfigurationError("--ray-insecure joins a cluster that checks no token; --ray local starts one "
                                 "that does")
    return RayTarget(address=address, cpus=cpus, insecure=insecure)


def is_secret_setting(name: str) -> bool:
    """Whether a forwarded setting is a credential (or may hold one) and must stay out of the runtime environment."""
    upper = name.upper()
    return name in FORWARDED_NAMES or any(part in upper for part in SECRET_NAME_PARTS)


def forwarded_environment() -> dict[str, str]:
    """The driver's settings a worker needs that are not secret, for Ray's runtime environment."""
    return {name: value for name, value in os.environ.items()
            if (name.startswith(FORWARDED_PREFIXES) or name in FORWARDED_NAMES) and not is_secret_setting(name)}


def worker_secrets() -> dict[str, str]:
    """The driver's secret settings a stream's worker needs (the model's and LangSmith's keys, the database URL),
    handed to each stream as a task argument; `adopt_secrets` puts them in the worker's environment."""
    return {name: value for name, value in os.environ.items()
            if (name.startswith(FORWARDED_PREFIXES) or name in FORWARDED_NAMES) and is_secret_setting(name)}


def adopt_secrets(secrets: dict[str, str]) -> None:
    """In a stream's worker, before anything reads them: the driver's secret settings."""
    os.environ.update(secrets)


def multi_host_problem(nodes: list[dict[str, Any]], database_url: str | None) -> str | None:
    """Why the memory database cannot serve this cluster, or None: a cluster spanning several hosts (nodes of
    distinct addresses; several nodes of one host are one host) needs a DATABASE_URL that other hosts reach."""
    hosts = {n.get("NodeManagerAddress") for n in nodes if n.get("Alive")}
    if len(hosts) <= 1:
        return None
    if not database_url:
        return (f"the Ray cluster spans {len(hosts)} hosts but DATABASE_URL is not set: the embedded memory "
                "database serves one host only; point DATABASE_URL at a PostgreSQL with pgvector every node "
                "reaches, or start one with `kernelsage memory serve` (docs/scale.md)")
    local = this_host_only(database_url)
    if local:
        return (f"the Ray cluster spans {len(hosts)} hosts but DATABASE_URL names {local}, which only this host "
                "reaches; give an address every node reaches (docs/scale.md)")
    return None


def this_host_only(database_url: str) -> str | None:
    """What in a database URL only this host reaches (a Unix socket, a loopback address), or None."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        hosts = str(conninfo_to_dict(database_url).get("host") or "").split(",")
    except Exception:  # a malformed URL is the database layer's to report, with its own words
        return None
    for host in hosts:
        if not host or host.startswith("/"):
            return f"a Unix socket ({host or 'the default one'})"
        if is_loopback_host(host):
            return f"the loopback address {host}"
    return None


@contextmanager
def connected(target: RayTarget, *, say: Any = None) -> Iterator[Any]:
    """Ray, initialised for the command: a local cluster started (and stopped at the end), or the cluster at
    the address joined (and left). Refused in one line: an address where no cluster answers in bounded time, a
    cluster that refuses this driver's token, a cluster anyone may join (unless `target.insecure`), a cluster of
    several hosts without DATABASE_URL."""
    ray = import_ray()
    options: dict[str, Any] = {"namespace": NAMESPACE, "log_to_driver": False, "logging_level": logging.WARNING,
                               "runtime_env": {"env_vars": forwarded_environment()}}
    with ExitStack() as undo:
        # Ray prints what its processes report (a worker or a node that died, say) on the driver's stdout, until
        # it shuts down; under --json stdout holds one JSON document only: it goes to stderr with the narrative.
        undo.enter_context(redirect_stdout(sys.stderr))
        if target.local:
            undo.enter_context(loopback_only())
            # Tokens: Ray's default for a cluster it starts, taken here without its warning; and RAY_AUTH_MODE as
            # it was afterwards (Ray sets it for the whole process).
            undo.enter_context(environment_setting(AUTH_MODE, None if AUTH_MODE in os.environ else "token"))
            temp_dir = undo.enter_context(_own_temp_dir())
            # Ray nices its workers (15) by default; on a machine the command shares, its streams and evaluators
            # would then wait behind every other process while the driver does not. address="local" starts a
            # cluster even where `ray start` left one in Ray's default temp folder.
            options.update(address="local", num_cpus=target.cpus, _node_ip_address=LOOPBACK, _temp_dir=temp_dir,
                           _system_config={"worker_niceness": 0})
        else:
            undo.enter_context(environment_setting(AUTH_MODE, token_to_send()))
            if is_loopback(target.address):  # a cluster bound to loopback is reached from this host's loopback
                undo.enter_context(loopback_only())
            _check_answers(target)
            options["address"] = target.address
        context = _init(ray, target, options)
        try:
            # The probe asked before joining; through Ray Client (ray://) only the joined cluster can say.
            if target.address.startswith("ray://") and not target.insecure and checks_no_token(ray):
                raise ConfigurationError(open_cluster_problem(target.address))
            problem = multi_host_problem(ray.nodes(), os.environ.get("DATABASE_URL"))
            if problem:
                raise ConfigurationError(problem)
            dashboard = getattr(context, "dashboard_url", "") or ""
            if say and dashboard:
                say(f"Ray dashboard: http://{dashboard}")
            yield ray
        finally:
            ray.shutdown()


def _init(ray: Any, target: RayTarget, options: dict[str, Any]) -> Any:
    stop_handler = signal.getsignal(signal.SIGTERM)
    try:
        context = ray.init(**options)
    except ray.exceptions.AuthenticationError:
        raise ConfigurationError(token_refused_problem(target.address)) from None
    except ConnectionError as exc:
        raise ConfigurationError(f"--ray {target.address}: no Ray cluster answered ({exc}); start one with "
                                 "`ray start --head` or use --ray local") from None
    # ray.init makes SIGTERM exit at once and silently; the command's own handler (Ctrl-C's, which says how
    # to resume) is put back, so a SIGTERM unwinds as Ctrl-C does and Ray shuts down in `connected`.
    if threading.current_thread() is threading.main_thread() and stop_handler is not None:
        signal.signal(signal.SIGTERM, stop_handler)
    return context


def _check_answers(target: RayTarget) -> None:
    """A joined cluster's address, asked in bounded time before Ray's own connection (which waits minutes)."""
    answer = probe(target.address)
    if answer.answer == "refused":
        raise ConfigurationError(token_refused_problem(target.address))
    if answer.answer != "ok":
        raise ConfigurationError(f"--ray {target.address}: no Ray cluster answered within {PROBE_S:.0f} s "
                                 f"({_first_sentence(answer.detail)}); start one with `ray start --head` "
                                 "(docs/scale.md) or use --ray local")
    if not target.insecure and open_cluster(target.address):
        raise ConfigurationError(open_cluster_problem(target.address))


def _first_sentence(text: str) -> str:
    return text.split(". ")[0].strip().rstrip(".") or "no detail"


@contextmanager
def _own_temp_dir() -> Iterator[str]:
    """A temp folder for the started cluster alone (Ray's default one may hold another cluster's session);
    removed at the end, unless the command failed in a way nobody foresaw: then its logs stay, and are named."""
    path = tempfile.mkdtemp(prefix="kernelsage-ray-")  # short: Ray's Unix sockets live under it
    try:
        yield path
    except (KernelsageError, KeyboardInterrupt, SystemExit, GeneratorExit):
        shutil.rmtree(path, ignore_errors=True)
        raise
    except BaseException:
        print(f"the Ray cluster's logs are kept in {path}/session_latest/logs", file=sys.stderr)
        raise
    shutil.rmtree(path, ignore_errors=True)
