"""Who can reach a Ray cluster the command uses: loopback only for one it starts, a token for one it joins.

Ray (2.60) takes the machine's network address for a node, and binds most of its servers on every interface,
unless the node's address is 127.0.0.1; it checks tokens when RAY_AUTH_MODE=token, which it turns on by itself
only for a cluster `ray.init` starts and for one it finds with `auto`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

LOOPBACK = "127.0.0.1"
LOOPBACK_SWITCH = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # "0": Ray keeps a node's addresses on loopback
AUTH_MODE = "RAY_AUTH_MODE"
ASK_S = 60.0  # how long a joined cluster's worker gets to say how the cluster authenticates


def is_loopback_host(host: str) -> bool:
    """Whether a host name or address is this host's loopback."""
    return host == "localhost" or host.startswith("127.") or host == "::1"


def is_loopback(address: str) -> bool:
    """Whether a host:port address (or ray://host:port) names this host's loopback."""
    return is_loopback_host(address.rpartition("://")[2].rpartition(":")[0].strip("[]"))


@contextmanager
def environment_setting(name: str, value: str | None) -> Iterator[None]:
    """`name` set to `value` (None: left as it is) in this process's environment, and as it was afterwards;
    Ray's native settings read again where the setting changed them."""
    before = os.environ.get(name)
    if value is not None:
        os.environ[name] = value
        _reload_ray_config()
    try:
        yield
    finally:
        if os.environ.get(name) != before:
            if before is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = before
            _reload_ray_config()


def _reload_ray_config() -> None:
    """Ray's native settings read RAY_AUTH_MODE once; a change after `import ray` needs them read again."""
    raylet = sys.modules.get("ray._raylet")
    if raylet is not None:
        raylet.Config.initialize("")


@contextmanager
def loopback_only() -> Iterator[None]:
    """Ray on this host's loopback address only, for the cluster started here and the processes it starts.

    Ray replaces a loopback node address by the machine's network address, so that other hosts may join, and
    its servers then listen there; its own switch for single-host use (named for the platforms where it is the
    default) keeps every address on loopback. Set for the driver (read from the environment at import, so the
    module's copy is set too) and inherited by every process of the cluster."""
    constants = sys.modules.get("ray._private.ray_constants")
    before = getattr(constants, "ENABLE_RAY_CLUSTER", None)
    with environment_setting(LOOPBACK_SWITCH, "0"):
        if constants is not None:
            constants.ENABLE_RAY_CLUSTER = False
        try:
            yield
        finally:
            if constants is not None:
                constants.ENABLE_RAY_CLUSTER = before


def token_to_send() -> str | None:
    """The RAY_AUTH_MODE a joining driver takes: "token" when this host holds a token and RAY_AUTH_MODE is unset (Ray itself sends it then only to a
    cluster it finds on its own, `auto`); None: RAY_AUTH_MODE stays as it is."""
    if AUTH_MODE in os.environ:
        return None
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    held = os.environ.get("RAY_AUTH_TOKEN") or (Path(path) if path else Path.home() / ".ray" / "auth_token").is_file()
    return "token" if held else None


def checks_no_token(ray: Any) -> bool:
    """Whether the joined cluster lets anyone join, asked of the cluster itself (a worker inherits its node's
    authentication mode)."""
    return ray.get(ray.remote(num_cpus=0)(_authentication_mode).remote(), timeout=ASK_S) != "token"


def _authentication_mode() -> str:
    return os.environ.get(AUTH_MODE, "disabled").lower()


def token_refused_problem(address: str) -> str:
    """The one line for a cluster that answered and refused this driver's authentication token."""
    mode = os.environ.get(AUTH_MODE, "")
    sent = ("no token (RAY_AUTH_MODE is not token)" if mode.lower() != "token"
            else "a token it does not accept")
    return (f"--ray {address}: the Ray cluster answered but refused this driver, which sent {sent}: set "
            "RAY_AUTH_MODE=token and the cluster's token (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token, "
            "as on its head node; docs/scale.md)")


def open_cluster_problem(address: str) -> str:
    """The one line for a cluster that lets anyone who reaches it run code."""
    return (f"--ray {address}: this Ray cluster does not check tokens, so anyone who reaches it can run code as its "
            "user; start it with token authentication (RAY_AUTH_MODE=token, docs/scale.md) or, on a network you "
            "trust, pass --ray-insecure")
