"""What the graph factory is given: models, memory, backend and tasks (never globals)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langgraph.runtime import Runtime

from kernelsage.graph.context import Context, resolve_context
from kernelsage.memory_backend.store import Memory, MemoryStore

if TYPE_CHECKING:
    from kernelsage.tasks.model import Task
    from kernelsage.tools.backend import KernelBackend


@dataclass(kw_only=True)
class AgentModels:
    """One chat model per role; roles left out use the generator's model."""

    generator: BaseChatModel
    optimizer: BaseChatModel | None = None
    diagnostician: BaseChatModel | None = None
    curator: BaseChatModel | None = None

    def for_role(self, role: str) -> BaseChatModel:
        return getattr(self, role) or self.generator


@dataclass(kw_only=True)
class AgentResources:
    """Everything the nodes use besides the state: models, backend, tasks, memory and default settings."""

    models: AgentModels
    backend: KernelBackend
    tasks: Callable[[str], Task]
    memory_store: MemoryStore | None = None  # None: the agent runs without memory
    embeddings: Embeddings | None = None
    read_only: bool = False  # a frozen memory: retrieval only, no credit, no consolidation
    default_context: Context = field(default_factory=Context)  # settings under a host's other context schema
    _memories: dict[tuple[str, str, str], Memory] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def settings(self, runtime: Runtime[Any]) -> Context:
        """kernelsage's settings for this run (see `resolve_context`)."""
        return resolve_context(runtime.context, self.default_context)

    def memory(self, context: Context) -> Memory | None:
        """The memory handle for this run's namespace, policy and parameters (opened once, then reused).

        A namespace created here starts with the backend's knowledge pack, stored inside its creation.
        """
        if self.memory_store is None or context.policy == "none":
            return None
        params = self.memory_store.params.with_overrides(**context.params)
        if context.top_k is not None:
            # recorded with each episode as what retrieval really did: the relevance pool it reads is
            # max(pool_size, k), so a top_k above pool_size widens the pool (retrieval.retrieve)
            params = params.with_overrides(top_k=context.top_k, pool_size=max(params.pool_size, context.top_k))
        key = (context.namespace, context.policy, repr(params))
        with self._lock:
            if key not in self._memories:
                from kernelsage.knowledge import has_builtin_pack, pack_items, seed_knowledge

                pack = context.seed_knowledge and not self.read_only and has_builtin_pack(self.backend.name)
                memory = self.memory_store.open(
                    context.namespace, embeddings=self.embeddings, policy=context.policy, read_only=self.read_only,
                    params=params, seed=(lambda: pack_items(backend=self.backend.name)) if pack else None,
                )
                if pack and memory.count_items() == 0:  # created elsewhere without its pack
                    seed_knowledge(memory, backend=self.backend.name)
                self._memories[key] = memory
            return self._memories[key]
