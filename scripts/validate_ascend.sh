#!/usr/bin/env bash
# First run on an Ascend host: prints the CANN release, the layout the backend found in it and what its builds
# use (`kernelsage doctor --backend ascend`), then builds, verifies and times every built-in reference kernel
# (src/kernelsage/tools/ascend/examples/<task>.cpp) on the device and prints one table of compile / verify /
# profile verdicts with every surprise listed under it; then tunes the tunable example
# (src/kernelsage/tools/ascend/examples/tunable/l1_relu/kernel.cpp, `kernelsage tune`) on the device and prints
# every configuration tried and the decision. Exit code 0 only when nothing surprised: every doctor item ok,
# every kernel compiled, correct on every case, and timed with a correct output, and the tuning ran with every
# configuration correct. This is how the ascend backend is validated on hardware; paste the whole output into
# an issue (docs/ascend.md).
#
#   source /usr/local/Ascend/ascend-toolkit/set_env.sh   # CANN 8.5 and later: /usr/local/Ascend/cann/set_env.sh
#   scripts/validate_ascend.sh            # all reference kernels, all healthy NPUs
#   KERNELSAGE_ASCEND_DEVICES=0 scripts/validate_ascend.sh
#   TUNING_BUDGET=40 scripts/validate_ascend.sh    # evaluations the tuning may spend (default 20)
set -uo pipefail
cd "$(dirname "$0")/.."
KS="${KERNELSAGE:-.venv/bin/kernelsage}"
PY="${PYTHON:-.venv/bin/python}"
REPORT="${REPORT_DIR:-runs/validate-ascend-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$REPORT"

fail() { echo "validate_ascend: $*" >&2; exit 2; }
[ -n "${ASCEND_HOME_PATH:-}" ] || fail "ASCEND_HOME_PATH is not set: source <CANN>/set_env.sh first (docs/ascend.md)"
command -v npu-smi >/dev/null 2>&1 || fail "npu-smi is not on PATH: install the Ascend driver"
TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$PY" -c "import torch_npu" 2>/dev/null \
    || fail "torch_npu does not import: pip install -e '.[npu]' (and check that set_env.sh was sourced)"

echo "== host"
uname -m
npu-smi info | sed -n '1,12p'
for f in version.cfg compiler/version.info; do
    [ -f "$ASCEND_HOME_PATH/$f" ] && grep -h -m2 -i "version" "$ASCEND_HOME_PATH/$f"
done

echo "== what the builds use (kernelsage doctor --backend ascend)"
"$KS" doctor --backend ascend --json > "$REPORT/doctor.json" 2> "$REPORT/doctor.err"
"$PY" - "$REPORT/doctor.json" <<'PY'
import json, sys
try:
    checks = json.load(open(sys.argv[1]))
except ValueError:
    sys.exit(print(open(sys.argv[1]).read()))
for check in checks:
    print(f"{check['name']}: {check['status']}: {check['detail']}")
PY

echo "== reference kernels (compile, verify on every case, profile against the torch_npu reference)"
tasks=()
for source in src/kernelsage/tools/ascend/examples/*.cpp; do
    task="$(basename "$source" .cpp)"
    tasks+=("$task")
    # The direct-launch route builds one file named kernel.cpp; `check` keeps a .cpp file's own name.
    mkdir -p "$REPORT/$task" && cp "$source" "$REPORT/$task/kernel.cpp"
    echo "-- $task"
    "$KS" check -t "$task" -b ascend --source "$REPORT/$task/kernel.cpp" --json > "$REPORT/$task.json" \
        2> "$REPORT/$task.err"
done

# Tiling found by profiling on the device: the example declares TILE_KB and BLOCKS_PER_CORE (docs/tuning.md).
echo "== tuning (kernelsage tune: examples/tunable/l1_relu, budget ${TUNING_BUDGET:-20} evaluations)"
mkdir -p "$REPORT/tuning"
"$KS" tune -t l1_relu -b ascend --source src/kernelsage/tools/ascend/examples/tunable/l1_relu/kernel.cpp \
    --budget "${TUNING_BUDGET:-20}" --json > "$REPORT/tuning/l1_relu.json" 2> "$REPORT/tuning/l1_relu.err"
tail -n 1 "$REPORT/tuning/l1_relu.err"

# The built-in kernel, then NPUKernelBench's route: kernel-only mode, a tensor list, an optional input, several
# outputs and in place, each through a fixture task's own pybind.cpp and ModelNew.
echo "== the backend's device tests"
"$PY" -m pytest -q -p no:cacheprovider tests/tools/ascend/test_ascend_device.py 2>&1 | tail -n 3
device_test=${PIPESTATUS[0]}

echo "== report"
"$PY" -m kernelsage.tools.ascend.validation_report "$REPORT" "${tasks[@]}"
status=$?
[ "$device_test" -eq 0 ] || { echo "surprise: tests/tools/ascend/test_ascend_device.py failed"; status=1; }
"$PY" -m kernelsage.tools.ascend.tuning_report "$REPORT/tuning/l1_relu.json" "$REPORT/tuning/l1_relu.err" || status=1
echo "reports: $REPORT"
exit $status
