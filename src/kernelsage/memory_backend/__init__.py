"""kernelsage's memory: experiences and rules in PostgreSQL + pgvector, credited by ATU, consolidated by UGC.

The public names below are imported on first use (PEP 562), so `import kernelsage.memory_backend` or
one of its light modules (params, records, atu, ugc) never loads the database driver or an embedding
model; `make_embeddings` loads torch and sentence-transformers only when a local model first embeds.
"""

from __future__ import annotations

from kernelsage.lazy_exports import lazy_exports

_WHERE = {
    "MemoryStore": "store", "Memory": "store", "RuleAbstractor": "store",
    "NewItem": "items", "MemoryItem": "items", "ShownItem": "items", "Retrieval": "items",
    "CommitResult": "items", "ConsolidationResult": "items", "NamespaceInfo": "items",
    "EpisodeTrace": "records", "Exposure": "records", "RoundOutcome": "records",
    "SageParams": "params", "DEFAULT_NAMESPACE": "params",
    "make_embeddings": "embeddings",
    "export_jsonl": "transfer", "import_jsonl": "transfer",
    "MemoryStoreView": "langgraph_store",
}
__all__ = [  # the keys of _WHERE, spelt out for linters and type checkers
    "DEFAULT_NAMESPACE", "CommitResult", "ConsolidationResult", "EpisodeTrace", "Exposure", "Memory",
    "MemoryItem", "MemoryStore", "MemoryStoreView", "NamespaceInfo", "NewItem", "Retrieval", "RoundOutcome",
    "RuleAbstractor", "SageParams", "ShownItem", "export_jsonl", "import_jsonl", "make_embeddings",
]


__getattr__, __dir__ = lazy_exports(__name__, _WHERE, __all__)
