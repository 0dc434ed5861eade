"""The cluster a command runs on: `--ray local|auto|ADDRESS` (or RAY_ADDRESS), joined or started for the
command, and the memory database every worker shares."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass
from typing import Any

from kernelsage.errors import ConfigurationError

INSTALL_HINT = "pip install 'kernelsage[ray]'"
NAMESPACE = "kernelsage"  # Ray namespace of the named actors (the model-call gates)
# What a worker must see of the driver's environment: kernelsage's settings, the model's endpoint and key, the
# database, the offline embedding model. A started local cluster inherits it anyway; a joined one does not.
FORWARDED_PREFIXES = ("KERNELSAGE_", "OPENAI_", "HF_", "TRANSFORMERS_", "LANGSMITH_", "LANGCHAIN_")
FORWARDED_NAMES = ("DATABASE_URL",)


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

    @property
    def local(self) -> bool:
        return self.address == "local"


def ray_target(option: str | None, cpus: int | None = None) -> RayTarget | None:
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
    return RayTarget(address=address, cpus=cpus)


def forwarded_environment() -> dict[str, str]:
    """The driver's settings a worker needs, for Ray's runtime environment."""
    return {name: value for name, value in os.environ.items()
            if name.startswith(FORWARDED_PREFIXES) or name in FORWARDED_NAMES}


def multi_host_problem(nodes: list[dict[str, Any]], database_set: bool) -> str | None:
    """Why this cluster cannot run the command on the embedded database, or None."""
    alive = [n for n in nodes if n.get("Alive")]
    if database_set or len(alive) <= 1:
        return None
    return (f"the Ray cluster has {len(alive)} nodes but DATABASE_URL is not set: the embedded memory database "
            "serves one host only; point DATABASE_URL at a PostgreSQL with pgvector every node reaches "
            "(docs/scale.md)")


@contextmanager
def connected(target: RayTarget, *, say: Any = None) -> Iterator[Any]:
    """Ray, initialised for the command: a local cluster started (and stopped at the end), or the cluster at
    the address joined (and left). A cluster of several hosts without DATABASE_URL is refused here."""
    ray = import_ray()
    options: dict[str, Any] = {"namespace": NAMESPACE, "log_to_driver": False, "logging_level": logging.WARNING,
                               "runtime_env": {"env_vars": forwarded_environment()}}
    if target.local:
        # Ray nices its workers (15) by default; on a machine the command shares, its streams and evaluators
        # would then wait behind every other process while the driver does not.
        options.update(num_cpus=target.cpus, _system_config={"worker_niceness": 0})
        os.environ.pop("RAY_ADDRESS", None)  # else ray.init joins that cluster instead of starting one
    else:
        options["address"] = target.address
    # Ray prints what its processes report (a worker that died, say) on the driver's stdout, which under
    # --json holds one JSON document only: it goes to stderr with the rest of the narrative.
    stop_handler = signal.getsignal(signal.SIGTERM)
    with redirect_stdout(sys.stderr):
        try:
            context = ray.init(**options)
            # ray.init makes SIGTERM exit at once and silently; the command's own handler (Ctrl-C's, which
            # says how to resume) is put back, so a SIGTERM unwinds as Ctrl-C does and Ray shuts down below.
            if threading.current_thread() is threading.main_thread() and stop_handler is not None:
                signal.signal(signal.SIGTERM, stop_handler)
        except ConnectionError as exc:
            raise ConfigurationError(f"--ray {target.address}: no Ray cluster answered ({exc}); start one with "
                                     "`ray start --head` or use --ray local") from None
        try:
            problem = multi_host_problem(ray.nodes(), bool(os.environ.get("DATABASE_URL")))
            if problem:
                raise ConfigurationError(problem)
            dashboard = getattr(context, "dashboard_url", "") or ""
            if say and dashboard:
                say(f"Ray dashboard: http://{dashboard}")
            yield ray
        finally:
            ray.shutdown()
