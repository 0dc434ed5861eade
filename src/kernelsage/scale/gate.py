"""`--max-model-calls N`: at most N model calls in flight per endpoint across the whole cluster.

One named actor per endpoint holds the permits; every stream's chat model takes one before each request and
gives it back after, through a callback (so retries, tools and every node are covered). A permit whose
holder died is taken back once it is older than the model's deadline (KERNELSAGE_MODEL_DEADLINE).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.runnables import RunnableBinding

from kernelsage.scale.cluster import import_ray
from kernelsage.scale.placement import pinned_to

POLL_S = 0.02


class CallGate:
    """Permits for one endpoint: `limit` at a time; `peak` is the most ever held at once."""

    def __init__(self, limit: int, lease_s: float) -> None:
        self.limit = limit
        self.lease_s = lease_s
        self.held: dict[str, float] = {}
        self.peak = 0

    async def acquire(self, holder: str) -> None:
        while True:
            now = time.monotonic()
            self.held = {h: t for h, t in self.held.items() if now - t < self.lease_s}
            if len(self.held) < self.limit:
                self.held[holder] = now
                self.peak = max(self.peak, len(self.held))
                return
            await asyncio.sleep(POLL_S)

    async def release(self, holder: str) -> None:
        self.held.pop(holder, None)

    async def most_held(self) -> int:
        return self.peak


def gate_name(endpoint: str) -> str:
    """The named actor of an endpoint (hashed: names of actors are short and free of URL characters)."""
    return "kernelsage-model-calls-" + hashlib.sha256(endpoint.encode()).hexdigest()[:16]


def open_gate(ray: Any, endpoint: str, limit: int, lease_s: float, on: str | None = None) -> Any:
    """The endpoint's gate, created by the driver before any stream starts, on node `on` (the driver's: it
    has no restarts, and a lost worker node must not take the permits with it)."""
    remote = ray.remote(num_cpus=0, max_concurrency=1000)(CallGate)
    return remote.options(name=gate_name(endpoint), get_if_exists=True, **pinned_to(on)).remote(limit, lease_s)


class ModelCallLimit(BaseCallbackHandler):
    """Takes a permit of the endpoint's gate before each chat request and gives it back after it."""

    raise_error = True  # a gate that cannot be reached must stop the call, not be skipped

    def __init__(self, gate: Any) -> None:
        self.gate = gate

    def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: Any, **kwargs: Any) -> None:
        import_ray().get(self.gate.acquire.remote(str(run_id)))

    def on_llm_end(self, response: Any, *, run_id: Any, **kwargs: Any) -> None:
        self.gate.release.remote(str(run_id))

    def on_llm_error(self, error: BaseException, *, run_id: Any, **kwargs: Any) -> None:
        self.gate.release.remote(str(run_id))


def limit_calls(chat_model: Any, gate: Any) -> Any:
    """The chat model, taking a permit of `gate` for every request it sends."""
    inner = chat_model
    while isinstance(inner, RunnableBinding):
        inner = inner.bound
    inner.callbacks = [*(inner.callbacks or []), ModelCallLimit(gate)]
    return chat_model
