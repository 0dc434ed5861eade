#!/usr/bin/env bash
# First run on an Ascend host: checks the set-up, then builds, verifies and times every built-in reference
# kernel for the NPU (src/kernelsage/tools/ascend/examples/<task>.cpp) on the device, and prints a short
# report. Exit code 0 only when every kernel is correct. This is how the ascend backend is validated on
# hardware; paste its output into an issue when something fails.
#
#   source /usr/local/Ascend/ascend-toolkit/set_env.sh
#   scripts/validate_ascend.sh            # all reference kernels, all healthy NPUs
#   KERNELSAGE_ASCEND_DEVICES=0 scripts/validate_ascend.sh
set -uo pipefail
cd "$(dirname "$0")/.."
KS="${KERNELSAGE:-.venv/bin/kernelsage}"
PY="${PYTHON:-.venv/bin/python}"
REPORT="${REPORT_DIR:-runs/validate-ascend-$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$REPORT"

fail() { echo "validate_ascend: $*" >&2; exit 2; }
[ -n "${ASCEND_HOME_PATH:-}" ] || fail "ASCEND_HOME_PATH is not set: source <CANN>/ascend-toolkit/set_env.sh first"
command -v npu-smi >/dev/null 2>&1 || fail "npu-smi is not on PATH: install the Ascend driver"
TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$PY" -c "import torch_npu" 2>/dev/null \
    || fail "torch_npu does not import: pip install -e '.[npu]' (and check that set_env.sh was sourced)"

echo "== host"
uname -m
npu-smi info | sed -n '1,12p'
grep -h -m1 -i "version" "$ASCEND_HOME_PATH/version.cfg" "$ASCEND_HOME_PATH/compiler/version.info" 2>/dev/null | head -n 1
"$KS" doctor --json > "$REPORT/doctor.json" 2>&1 || true
"$PY" - "$REPORT/doctor.json" <<'PY'
import json, sys
try:
    checks = json.load(open(sys.argv[1]))
except ValueError:
    sys.exit(print(open(sys.argv[1]).read()))
for check in checks:
    if check["name"] in ("isolation", "ascend backend"):
        print(f"{check['name']}: {check['status']}: {check['detail']}")
PY

echo "== reference kernels (compile, verify on every case, profile against the torch_npu reference)"
status=0
for source in src/kernelsage/tools/ascend/examples/*.cpp; do
    task="$(basename "$source" .cpp)"
    # The direct-launch route builds one file named kernel.cpp; `check` keeps a .cpp file's own name.
    mkdir -p "$REPORT/$task" && cp "$source" "$REPORT/$task/kernel.cpp"
    if "$KS" check -t "$task" -b ascend --source "$REPORT/$task/kernel.cpp" --json > "$REPORT/$task.json" 2> "$REPORT/$task.err"; then
        :
    else
        status=1
    fi
    "$PY" - "$task" "$REPORT/$task.json" "$REPORT/$task.err" <<'PY'
import json, sys
task, path, err = sys.argv[1:]
try:
    report = json.load(open(path))
except ValueError:
    lines = open(err).read().strip().splitlines()
    sys.exit(print(f"{task:16s} harness error: {lines[-1] if lines else 'no output'}"))
profile = report.get("profile") or {}
line = f"{task:16s} {report['status']:14s}"
if report["compile"]:
    line += f" compile {report['compile']['seconds']:.1f}s"
if profile.get("candidate"):
    cand, ref = profile["candidate"], profile["reference"]
    line += (f"  kernel {cand['mean'] * 1e6:.1f} us (cv {cand['cv']:.1%})  torch_npu {ref['mean'] * 1e6:.1f} us"
             f"  speedup {profile['speedup']:.2f}x  [{profile['message']}]")
elif not report["correct"]:
    verify = report.get("verify") or {}
    line += "  " + (verify.get("message") or report["compile"].get("log", "")[-300:]).replace("\n", " | ")
print(line)
PY
done

echo "== optional: the backend's device test"
"$PY" -m pytest -q -p no:cacheprovider tests/tools/ascend/test_ascend_device.py 2>&1 | tail -n 3
echo "reports: $REPORT"
exit $status
