#!/usr/bin/env bash
# Check the triton backend end to end on a real NVIDIA GPU host (what this project's CPU-only machines cannot):
# doctor sees the device, the GPU-marked tests pass, and `kernelsage check` accepts a correct ReLU (timed by the
# judge's clock), refuses torch.relu and refuses a kernel that misses the last element. Prints one verdict table
# and exits 1 on any surprise. Needs a CUDA build of torch in .venv (docs/triton.md, "On a GPU host").
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
KS=.venv/bin/kernelsage
K=tests/tools/triton/kernels
failures=0
rows=()

verdict() {  # name, expected, got
    if [ "$2" = "$3" ]; then rows+=("ok    $1: $3"); else rows+=("FAIL  $1: expected $2, got $3"); failures=$((failures + 1)); fi
}

cuda=$($PY -c "import torch; print(bool(torch.version.cuda) and torch.cuda.is_available())" 2>/dev/null)
verdict "torch sees a CUDA GPU" True "${cuda:-error}"
doctor=$($KS doctor --backend triton --json 2>/dev/null | $PY -c "import json,sys; print([c['status'] for c in json.load(sys.stdin) if c['name'] == 'triton cuda'][0])" 2>/dev/null)
verdict "doctor: triton cuda" ok "${doctor:-error}"

status() {  # source -> the check's status
    $KS check --backend triton --device cuda --task l1_relu --source "$1" --json 2>/dev/null \
        | $PY -c "import json,sys; r=json.load(sys.stdin); p=r.get('profile') or {}; c=p.get('candidate') or {}; print(r['status'] + (' timed' if c.get('reps') else ''))" 2>/dev/null
}
verdict "check: correct ReLU" "ok timed" "$(status $K/relu.py)"
verdict "check: torch.relu" forbidden "$(status $K/relu_torch.py)"
verdict "check: misses the last element" partial_write "$(status $K/relu_misses_last.py)"

$PY -m pytest -q -m gpu tests/tools/triton/test_triton_gpu.py >/tmp/kernelsage-gpu-tests.log 2>&1
verdict "pytest -m gpu" 0 "$?"
$PY -m pytest -q tests/tools/triton >/tmp/kernelsage-triton-tests.log 2>&1
verdict "pytest tests/tools/triton (interpreter, attacks)" 0 "$?"

printf '%s\n' "validate_gpu.sh on $(hostname):" "${rows[@]}"
[ "$failures" -eq 0 ] || { echo "$failures surprise(s); logs in /tmp/kernelsage-*-tests.log"; exit 1; }
