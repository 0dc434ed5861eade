"""Whether a Ray cluster answers at an address, and whether it takes this driver's credentials, in bounded time.

`ray.init(address=...)` waits for an address where nothing listens for minutes, printing Ray's warnings, and says
"no cluster" where a cluster answered but refused the token. The probe asks the cluster's control store (GCS) one
question from a child process, which is killed when PROBE_S runs out, and reports what came back:

- "ok": the cluster answered with these credentials;
- "refused": it answered and refused them (token authentication);
- "silent": nothing answered in time, or nothing listens there;
- "unknown": the address could not be resolved (the message says why).

A probe with authentication turned off (`open_cluster`) tells a cluster anyone may join from one that checks tokens.
Ray Client addresses (ray://) speak another protocol: they get a connection check only.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from urllib.parse import urlsplit

PROBE_S = 15.0  # how long a cluster gets to answer before the command says none did
# The child's question: Ray's own resolution of `auto` (RAY_ADDRESS, the last `ray start`), then one read of the GCS's
# key-value store, which every cluster answers and whose refusal is the token check.
_PROBE_CODE = """
import json, socket, sys
try:
    from ray._private.services import canonicalize_bootstrap_address_or_die
    from ray._raylet import GcsClient
    address = sys.argv[1] if sys.argv[1] != "auto" else canonicalize_bootstrap_address_or_die("auto")
    host, _, port = address.rpartition(":")
    try:  # GcsClient waits 40 s even where the port is closed
        socket.create_connection((host.strip("[]"), int(port)), timeout=10).close()
    except OSError as exc:
        print(json.dumps({"answer": "silent", "detail": f"nothing answers at {address}: {exc.strerror or exc}"}))
        sys.exit(0)
    GcsClient(address=address).internal_kv_get(b"session_name", namespace=b"session", timeout=5)
    print(json.dumps({"answer": "ok"}))
except Exception as exc:
    name = type(exc).__name__
    answer = "refused" if name == "AuthenticationError" else "silent" if name in ("RpcError", "GetTimeoutError") \\
        else "unknown"
    print(json.dumps({"answer": answer, "detail": f"{name}: {str(exc).splitlines()[0] if str(exc) else ''}"}))
"""


@dataclass(frozen=True)
class ProbeAnswer:
    answer: str  # ok, refused, silent, unknown
    detail: str = ""


def probe(address: str, *, environment: dict[str, str] | None = None, timeout_s: float = PROBE_S) -> ProbeAnswer:
    """What the cluster at `address` (host:port, auto, ray://host:port) answers, within `timeout_s` seconds."""
    if address.startswith("ray://"):
        return _connects(address, timeout_s)
    try:
        done = subprocess.run([sys.executable, "-c", _PROBE_CODE, address], capture_output=True, text=True,
                              timeout=timeout_s, env=environment if environment is not None else dict(os.environ),
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return ProbeAnswer("silent", f"no answer within {timeout_s:.0f} s")
    lines = done.stdout.strip().splitlines()
    try:
        found = json.loads(lines[-1])
    except (IndexError, ValueError):
        return ProbeAnswer("unknown", (done.stderr.strip().splitlines() or ["the probe printed nothing"])[-1])
    return ProbeAnswer(found["answer"], found.get("detail", ""))


def open_cluster(address: str, *, timeout_s: float = PROBE_S) -> bool:
    """Whether the cluster at `address` answers a caller that sends no token (anyone who reaches it may join)."""
    if address.startswith("ray://"):
        return False  # not knowable from outside; the connected driver asks the cluster instead
    unauthenticated = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    for name in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        unauthenticated.pop(name, None)
    return probe(address, environment=unauthenticated, timeout_s=timeout_s).answer == "ok"


def _connects(address: str, timeout_s: float) -> ProbeAnswer:
    parts = urlsplit(address)
    try:
        with socket.create_connection((parts.hostname or "", parts.port or 10001), timeout=timeout_s):
            return ProbeAnswer("ok")
    except TimeoutError:
        return ProbeAnswer("silent", f"no answer within {timeout_s:.0f} s")
    except OSError as exc:
        return ProbeAnswer("silent", exc.strerror or str(exc))
