#!/usr/bin/env bash
# One-command set-up: a virtual environment in .venv with kernelsage and everything it needs.
# torch is installed first and pinned to the CPU build; an unpinned torch would pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
[ -d .venv ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet "torch==2.13.0"
.venv/bin/python -m pip install --quiet -e ".[embedded,local-embeddings,dev]"
echo "kernelsage installed in .venv: try '.venv/bin/kernelsage --version'"
