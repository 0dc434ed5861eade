"""Every hyperparameter of the memory methods, in one place, with the published defaults (METHOD §6)."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from kernelsage.errors import ConfigurationError

# The namespace the CLI and the graph use unless told otherwise: backend / kernel language / project.
DEFAULT_NAMESPACE = "cpu/cpp/default"
RETRIEVALS = ("vector", "hybrid")  # how the relevance pool is taken (SageParams.retrieval)
ADOPTIONS = ("declared", "audited")  # what ATU counts as adopted (SageParams.adoption)


@dataclass(frozen=True, kw_only=True)
class SageParams:
    """Hyperparameters of ATU, UGC, retrieval and the value-memory baseline.

    Published defaults (same for every model and task set): delta = beta = 0.2, gamma = 0.3,
    K_ado = K_op = 3, B = 10,000 tokens, eta_min = 0.05, mu = 0.1, T = 30 rounds.
    Values marked "reconstruction" are not in the public record; they are ours.
    """

    # ATU (METHOD §4)
    delta: float = 0.2  # terminal score of a failed episode is -delta
    beta: float = 0.2  # credit of a shown but not adopted item is -beta
    gamma: float = 0.3  # rerank weight of utility: score = relevance + gamma * u
    eta_min: float = 0.05  # floor of the utility step size
    # What counts as adopted (METHOD §3): "declared", the model's declarations (the method); "audited", only
    # declarations the written code shows evidence of (kernelsage.graph.adoption_audit, applied by the curator;
    # an unevidenced declaration is credited as shown but not adopted). docs/memory.md "The adoption audit".
    adoption: str = "declared"
    # UGC (METHOD §5)
    k_ado: int = 3  # adoptions needed before an item can become a rule
    k_op: int = 3  # distinct adopting operators needed
    hot_budget_tokens: int = 10_000  # B, the resident hot-memory budget
    mu: float = 0.1  # access-estimate smoothing of resident rules
    # Episodes (METHOD §1)
    rounds: int = 30  # T, the interaction budget of an episode
    # Retrieval (reconstruction): relevance pool size, items returned, IVFFlat lists read per search
    pool_size: int = 40
    top_k: int = 6
    # IVFFlat lists read per search: more probes find more and cost more. 0 (the default): scaled with the
    # namespace's index, max(3, lists // 120) (vector_index.probes_for), which kept recall@10 on the hard set
    # at 0.97-1.0 from 100K items (320 lists, 3 probes) to 1M (1,920 lists, 16 probes), p50 2.5-14 ms on 2
    # cores (bench/memory_bench.py, docs/memory.md); namespaces under 5,000 items are searched exactly.
    probes: int = 0
    # Near-duplicate experiences (reconstruction): a new experience merges into a stored one with the same
    # text (any operator family), or of the same operator family whose embedding's cosine similarity reaches
    # this (dedup.py, docs/memory.md). 1.0 merges only identical vectors (and identical texts).
    merge_similarity: float = 0.97
    # Hybrid retrieval (reconstruction): "vector" takes the relevance pool by cosine similarity alone; "hybrid"
    # also takes one by the names the query text holds (identifiers such as DataCopyPad or _mm256_fmadd_ps,
    # full-text search in PostgreSQL) and fuses the two by reciprocal-rank fusion with constant rrf_k before
    # the policy's rerank (hybrid.py, docs/memory.md "Retrieval by exact names").
    retrieval: str = "vector"
    rrf_k: int = 60
    # Value memory baseline, EvoKernel-style (METHOD §7; values are reconstruction)
    value_alpha: float = 0.1  # Q <- Q + alpha (r - Q)
    value_lambda: int = 3  # take top lambda*N by similarity, then N by Q
    value_epsilon: float = 0.1  # epsilon-greedy exploration

    def __post_init__(self) -> None:
        problems = []
        for name in ("delta", "beta", "gamma", "eta_min", "mu", "value_alpha", "value_epsilon", "merge_similarity"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                problems.append(f"{name}={value} must lie in [0, 1]")
        for name in ("k_ado", "k_op", "hot_budget_tokens", "rounds", "pool_size", "top_k", "value_lambda"):
            if getattr(self, name) < 1:
                problems.append(f"{name}={getattr(self, name)} must be at least 1")
        if self.retrieval not in RETRIEVALS:
            problems.append(f"retrieval={self.retrieval!r} must be one of {', '.join(RETRIEVALS)}")
        if self.adoption not in ADOPTIONS:
            problems.append(f"adoption={self.adoption!r} must be one of {', '.join(ADOPTIONS)}")
        if self.rrf_k < 1:
            problems.append(f"rrf_k={self.rrf_k} must be at least 1")
        if self.probes < 0:
            problems.append(f"probes={self.probes} must be 0 (scaled with the index) or a count of lists")
        if self.eta_min == 0.0:
            problems.append("eta_min=0 would let utility freeze; use a positive floor")
        if self.top_k > self.pool_size:
            problems.append(f"top_k={self.top_k} exceeds pool_size={self.pool_size}")
        if problems:
            raise ConfigurationError("invalid SageParams: " + "; ".join(problems))

    def with_overrides(self, **overrides: Any) -> SageParams:
        """Return a copy with some values changed; unknown names are an error."""
        known = {f.name for f in fields(self)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ConfigurationError(f"unknown SageParams field(s): {', '.join(unknown)}")
        return replace(self, **overrides)


# The method's own names for some fields (METHOD §6), accepted wherever a parameter is named by a user.
ALIASES = {"B": "hot_budget_tokens", "K_ado": "k_ado", "K_op": "k_op", "T": "rounds", "eta": "eta_min"}


def parse_overrides(texts: str | list[str] | tuple[str, ...]) -> dict[str, Any]:
    """`name=value` settings (a list, or one string separated by commas or spaces) as SageParams overrides,
    each value converted to its field's type; the method's names (B, K_ado, K_op, T) are accepted.
    Checked by building a SageParams, so a bad name or value is a ConfigurationError saying which."""
    if isinstance(texts, str):
        texts = texts.replace(",", " ").split()
    types = {f.name: f.type for f in fields(SageParams)}
    overrides: dict[str, Any] = {}
    for text in texts:
        name, sep, raw = text.partition("=")
        name = ALIASES.get(name.strip(), name.strip())
        if not sep or name not in types:
            raise ConfigurationError(
                f"cannot read parameter {text!r}: write NAME=VALUE with NAME one of "
                f"{', '.join(sorted([*types, *ALIASES]))}"
            )
        if name == "probes" and raw.strip() == "auto":
            overrides[name] = 0  # scaled with the index, the default
            continue
        if types[name] in (str, "str"):
            overrides[name] = raw.strip()
            continue
        try:
            overrides[name] = int(raw) if types[name] in (int, "int") else float(raw)
        except ValueError:
            raise ConfigurationError(f"parameter {name} needs a number, not {raw.strip()!r}") from None
    SageParams().with_overrides(**overrides)  # validates the values together
    return overrides
