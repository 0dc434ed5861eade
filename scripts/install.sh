#!/usr/bin/env bash
# One-command set-up: a virtual environment in .venv with kernelsage and everything it needs.
# torch is installed first and pinned to the CPU build; an unpinned torch would pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"

# Candidate kernels are compiled and run inside bubblewrap sandboxes (docs/security.md). As root (as in CI),
# install it with apt when it is missing; never fail the installation over it: `kernelsage doctor` reports
# the isolation level, and without it kernelsage refuses to run candidates.
if ! command -v bwrap >/dev/null 2>&1; then
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
        echo "installing bubblewrap (candidate isolation) with apt-get"
        if ! { DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
               DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bubblewrap; }; then
            echo "warning: could not install bubblewrap with apt-get; kernelsage will refuse to run candidate" \
                 "kernels until it is installed (see 'kernelsage doctor')" >&2
        fi
    else
        echo "warning: bubblewrap (bwrap) is not installed and this is not a root shell with apt-get: install" \
             "it (e.g. 'sudo apt-get install bubblewrap'); kernelsage refuses to run candidate kernels without" \
             "isolation (see 'kernelsage doctor')" >&2
    fi
fi
# Optional: triton-ascend's compiler for the triton backend's npu-frontend device (docs/triton.md), in a
# virtual environment of its own (it installs the `triton` package too, so it cannot share .venv). About
# 35 s here (torch from the local wheel, triton-ascend 54 MB); never fails the installation.
install_triton_ascend() {
    "$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || {
        echo "warning: triton-ascend 3.2.0 is built for Python 3.11 only; $PYTHON is not" >&2; return 1; }
    [ -d .venv-triton-ascend ] || "$PYTHON" -m venv .venv-triton-ascend || return 1
    .venv-triton-ascend/bin/python -m pip install --quiet "torch==2.13.0" "triton_ascend==3.2.0" "pybind11==3.1.0"
}
# It goes on beside the main installation (pip mostly waits on one core): about 35 s less set-up.
triton_ascend=""
if [ "${KERNELSAGE_SKIP_TRITON_ASCEND:-0}" != "1" ]; then
    install_triton_ascend &
    triton_ascend=$!
    # if the main installation fails, the background one must not go on writing after this script has exited
    trap '[ -z "$triton_ascend" ] || { pkill -TERM -P "$triton_ascend"; kill "$triton_ascend"; } 2>/dev/null; true' EXIT
fi

[ -d .venv ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet "torch==2.13.0"
.venv/bin/python -m pip install --quiet -e ".[embedded,local-embeddings,dev,ray,triton]"
# the wheel's pgvector is built for AVX-512 CPUs: where it cannot run, build it for this one
bash scripts/pgvector_for_this_cpu.sh .venv/bin/python

if [ -n "$triton_ascend" ]; then
    wait "$triton_ascend" || echo "warning: triton-ascend was not installed in .venv-triton-ascend; the triton" \
        "backend's npu-frontend device is unavailable (see 'kernelsage doctor --backend triton')" >&2
    triton_ascend=""
fi
echo "kernelsage installed in .venv: try '.venv/bin/kernelsage --version'"
