"""The ascend backend's pure parts: device discovery, diagnostics, the judge's verdicts on device runs, the
timing arithmetic of NPU event samples, running a CPU reference on another device, the prompt contract."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from kernelsage.graph.nodes.contract import kernel_contract
from kernelsage.tasks.loaders import find_task, load_suite
from kernelsage.tools.ascend import verdicts
from kernelsage.tools.ascend.candidate import LayoutError, classify_layout, parse_op_signature, snake_case
from kernelsage.tools.ascend.device_runner import attribute_lists, time_calls
from kernelsage.tools.ascend.devices import DevicePool, core_memory, npu_arch, parse_npu_smi, selected_devices
from kernelsage.tools.ascend.diagnostics import parse_build_log
from kernelsage.tools.ascend.placement import placed_on
from kernelsage.tools.ascend.sandboxing import with_device_nodes
from kernelsage.tools.ascend.toolchain import ToolchainProblem, cann_version
from kernelsage.tools.compare import poison
from kernelsage.tools.isolation import Isolation, sandboxed
from kernelsage.tools.results import Status
from kernelsage.tools.timing import timing_from_samples

NPU_SMI = """+------------------------------------------------------------------------------------------------+
| npu-smi 24.1.rc2                 Version: 24.1.rc2                                             |
+---------------------------+---------------+----------------------------------------------------+
| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
+===========================+===============+====================================================+
| 0     910B3               | OK            | 92.1        38                0    / 0             |
| 0                         | 0000:C1:00.0  | 0           0    / 0          3382 / 65536         |
+===========================+===============+====================================================+
| 1     910B3               | Alarm         | 90.4        37                0    / 0             |
| 0                         | 0000:C2:00.0  | 0           0    / 0          3381 / 65536         |
+===========================+===============+====================================================+
"""


def test_npu_smi_table_gives_devices_soc_and_arch() -> None:
    npus = parse_npu_smi(NPU_SMI)
    assert [(n.index, n.soc, n.health) for n in npus] == [(0, "Ascend910B3", "OK"), (1, "Ascend910B3", "Alarm")]
    assert selected_devices({}, npus) == [0]  # an alarmed NPU is left out unless chosen explicitly
    assert selected_devices({"KERNELSAGE_ASCEND_DEVICES": "1,0"}, npus) == [1, 0]
    assert npu_arch("Ascend910B3") == "dav-2201" and npu_arch("Ascend310P3") == "dav-2002"
    assert core_memory("Ascend910B4")[0] == 192 * 1024
    with pytest.raises(ToolchainProblem, match="unknown Ascend SoC"):
        npu_arch("Ascend999")


def test_device_pool_lends_each_device_once() -> None:
    pool = DevicePool([3, 5])
    with pool.lease() as first, pool.lease() as second:
        assert {first, second} == {3, 5}
        with pytest.raises(ToolchainProblem, match="became free"), pool.lease(timeout=0.05):
            pass
    with pool.lease(timeout=0.05) as again:
        assert again in (3, 5)


def test_cann_version_is_read_from_the_install(tmp_path) -> None:
    assert cann_version(tmp_path) == "unknown"
    (tmp_path / "compiler").mkdir()
    (tmp_path / "compiler" / "version.info").write_text("Version=7.0.0.alpha003\nruntime_running_version=[7.0]\n")
    assert cann_version(tmp_path) == "7.0.0.alpha003"


def test_layouts_and_opdef_signature() -> None:
    assert classify_layout({"kernel.cpp": "", "tiling.h": ""}).route == "direct"
    layout = classify_layout({"op_host/layer_norm.cpp": "", "op_kernel/layer_norm.cpp": ""})
    assert (layout.route, layout.op) == ("msopgen", "layer_norm")
    with pytest.raises(LayoutError, match="not allowed"):
        classify_layout({"../kernel.cpp": ""})
    source = ('this->Input("x").DataType({ge::DT_FLOAT});\nthis->Attr("eps").AttrType(OPTIONAL).Float(1e-5);\n'
              'this->Attr("axes").ListInt({-1});\nthis->Output("y");\nOP_ADD(LayerNorm);')
    signature = parse_op_signature(source, "layer_norm")
    assert (signature.op_type, signature.inputs, signature.outputs) == ("LayerNorm", ("x",), ("y",))
    assert [(a.name, a.type) for a in signature.attrs] == [("eps", "Float"), ("axes", "ListInt")]
    assert snake_case("AddRmsNorm") == "add_rms_norm"


def test_build_log_parsing_covers_every_tool() -> None:
    log = "\n".join([
        "$ kernel",
        "/build/kernel.cpp:3:1: error: unknown type name 'LocalTensr'",
        "In file included from kernel.cpp:2:",
        "ld.lld: error: undefined symbol: AscendC::GetBlockNum()",
        ">>> referenced by kernel.cpp",
        "CMake Error: The source directory \"/build/project\" does not exist.",
        "make: *** [Makefile:10: all] Error 2",
        "[ERROR] TBE(12345,python3):2024-01-01 op compile failed",
        "/usr/bin/ld: glue_op.o: undefined reference to `aclnnAddCustom'",
    ])
    messages = parse_build_log(log)
    assert [(m.file, m.line) for m in messages[:1]] == [("kernel.cpp", 3)]
    texts = [m.message for m in messages]
    assert texts[1] == "undefined symbol: AscendC::GetBlockNum() (referenced by kernel.cpp)"
    assert texts[2].startswith("cmake: The source directory")
    assert texts[3] == "[Makefile:10: all] Error 2"
    assert texts[4].startswith("TBE(12345")
    assert "undefined reference to `aclnnAddCustom'" in texts[5]


@pytest.fixture(scope="module")
def relu():
    return find_task(load_suite("builtin"), "l1_relu")


def _verify_inputs(relu, trials: int = 2):
    calls, expected, private, names = [], [], [], []
    for trial in range(trials):
        instance = relu.instantiate(relu.cases[0], trial)
        calls.append({"set": trial, "trial": trial, "case": relu.cases[0].name})
        expected.append(instance.reference())
        private.append([t.clone() for t in instance.inputs.values()])
        names.append(list(instance.inputs))
    return calls, expected, private, names


def _judge(relu, returned, stderr: str = "", returncode: int | None = 0, timed_out: bool = False,
           sandbox_started: bool = True):
    calls, expected, private, names = _verify_inputs(relu)
    result = returned(expected, private) if callable(returned) else returned
    return verdicts.judge_verify(relu, calls, expected, private, names, result, returncode, timed_out, stderr, 30.0,
                                 sandbox_started)


def test_verdicts_on_device_runs(relu) -> None:
    good = _judge(relu, lambda exp, inp: {"calls": [{"code": 0, "outputs": list(e), "inputs": list(i)}
                                                    for e, i in zip(exp, inp, strict=True)]})
    assert [c["passed"] for c in good] == [True, True]

    def unwritten(exp, inp):
        out = [e.clone() for e in exp[0]]
        poison(out[0].reshape(-1)[:5], 0)
        return {"calls": [{"code": 0, "outputs": out, "inputs": list(inp[0])}]}

    assert _judge(relu, unwritten)[0]["status"] == Status.PARTIAL_WRITE.value
    cached = _judge(relu, lambda exp, inp: {"calls": [{"code": 0, "outputs": list(exp[0]), "inputs": list(i)}
                                                      for i in inp]})
    assert [c["status"] for c in cached] == ["ok", Status.CACHED_RESULT.value]
    modified = _judge(relu, lambda exp, inp: {"calls": [{"code": 0, "outputs": list(exp[0]),
                                                         "inputs": [inp[0][0] + 1]}]})
    assert modified[0]["status"] == Status.INPUT_MODIFIED.value
    fault = _judge(relu, {"calls": [{"code": -1, "error": "RuntimeError: launch failed"}]},
                   stderr="[ERROR] RUNTIME(1234): aicore exception, error code = 0x800000\n")
    assert fault[0]["status"] == Status.RUNTIME_ERROR.value and "aicore exception" in fault[0]["message"]
    wrong_shape = _judge(relu, lambda exp, inp: {"calls": [{"code": 0, "outputs": [exp[0][0][:1]],
                                                            "inputs": list(inp[0])}]})
    assert "came back as" in wrong_shape[0]["message"]
    assert _judge(relu, None, timed_out=True)[0]["status"] == Status.TIMEOUT.value
    assert _judge(relu, {"failure": "oom", "error": "NPU out of memory"})[0]["status"] == Status.OOM.value
    crashed = _judge(relu, None, returncode=-11)
    assert crashed[0]["status"] == Status.RUNTIME_ERROR.value and "signal 11" in crashed[0]["message"]
    # Blame follows what bubblewrap reported (it never started the runner), not what stderr says.
    unstarted = _judge(relu, None, stderr="bwrap: Can't find source path /opt/x: Permission denied\n",
                       returncode=1, sandbox_started=False)
    assert unstarted[0]["status"] == Status.HARNESS_ERROR.value and "/opt/x" in unstarted[0]["message"]
    forged = _judge(relu, None, stderr="bwrap: Can't find source path /opt/x\n", returncode=1)
    assert forged[0]["status"] == Status.RUNTIME_ERROR.value  # the runner's own words shift no blame


class EventClock:
    """A stand-in NPU runtime for the timing arithmetic (labelled: not torch_npu): events read a clock that
    each call advances by a known amount."""

    def __init__(self) -> None:
        self.now = 0.0
        self.synchronized = 0

    def synchronize(self) -> None:
        self.synchronized += 1

    def event(self):
        clock = self

        class Event:
            def record(self) -> None:
                self.at = clock.now

            def synchronize(self) -> None:
                clock.synchronized += 1

            def elapsed_time(self, end) -> float:  # milliseconds, as torch.npu.Event reports
                return (end.at - self.at) * 1e3

        return Event()


def test_event_samples_become_the_same_statistics_as_on_the_cpu() -> None:
    clock = EventClock()
    seen = []

    def call(index: int) -> None:
        seen.append(index)
        clock.now += 0.001 * (1 + index % 3)  # 1, 2, 3 ms in turn

    samples = time_calls(call, clock, warmup=5, reps=9)  # type: ignore[arg-type]
    assert seen == [0, 1, 2, 3, 4, *range(9)] and clock.synchronized == 10
    assert [round(s, 6) for s in samples] == [0.001, 0.002, 0.003] * 3
    timing = timing_from_samples(verdicts.checked_samples(samples, 9), warmup=5)
    assert math.isclose(timing.mean, 0.002) and math.isclose(timing.median, 0.002) and timing.reps == 9
    for bad in ([0.001] * 8, [0.001] * 8 + [float("nan")], [0.001] * 8 + [-1.0], "x"):
        with pytest.raises(ValueError, match="malformed timings"):
            verdicts.checked_samples(bad, 9)


def test_attributes_reach_both_routes_in_their_form() -> None:
    assert attribute_lists({"dim": 1, "eps": 1e-5, "shape": (2, 3), "mode": "max"}) == (
        ["dim", "eps", "shape", "mode"], [0, 1, 2, 3], [1, 0, 0, 0], [0.0, 1e-5, 0.0, 0.0], [[], [], [2, 3], []],
        ["", "", "", "max"])
    assert verdicts.attr_args({"eps": 0.1, "dim": 2}, ["dim", "alpha"]) == [2, 0.1]  # by name, then unclaimed
    with pytest.raises(verdicts.AttributeMismatch, match="'alpha', for which the task has no value"):
        verdicts.attr_args({"dim": 2}, ["dim", "alpha"])  # never a made-up 0


def test_a_cpu_reference_runs_unchanged_on_another_device(relu) -> None:
    instance = relu.instantiate(relu.cases[0], 0)
    with placed_on("meta"):
        (out,) = instance.reference()
    assert out.device.type == "meta"
    assert all(t.device.type == "cpu" for t in instance.inputs.values())  # the task's own tensors stay put
    model = torch.nn.Linear(4, 3)
    with placed_on("meta"):
        assert model(torch.ones(2, 4)).device.type == "meta"


def test_device_nodes_are_the_only_devices_added_to_the_sandbox() -> None:
    isolation = Isolation("bubblewrap", "/usr/bin/bwrap", "0.8.0")
    command = sandboxed(isolation, ["python3", "-V"], env={}, ro_binds=[("/opt", "/opt")], chdir="/job")
    bound = with_device_nodes(command, isolation, ["/dev/davinci2", "/dev/davinci_manager"])
    assert len(bound) == len(command) + 6 and "--dev" in command  # bubblewrap's own minimal /dev stays
    at = bound.index("--dev-bind")
    assert bound[at:at + 6] == ["--dev-bind", "/dev/davinci2", "/dev/davinci2", "--dev-bind",
                                "/dev/davinci_manager", "/dev/davinci_manager"]
    assert bound[-3:] == ["--", "python3", "-V"]
    assert with_device_nodes(["python3"], Isolation("none"), ["/dev/davinci0"]) == ["python3"]


def test_the_contract_comes_from_the_backend() -> None:
    ascend, compact = kernel_contract("ascend"), kernel_contract("ascend", True)
    assert ascend.startswith("Write one file, `kernel.cpp`, in Ascend C")
    assert "int ks_launch(const ks_tensor* inputs" in ascend and "typedef struct ks_npu" in ascend
    assert "DataCopy moves multiples of 32 bytes" in ascend and "DataCopy moves" not in compact
    assert "<!-- details -->" not in ascend and "int ks_launch(" in compact
    assert kernel_contract("cpu").startswith("```c\n// kernelsage_cpu.h")


def test_the_ascend_knowledge_pack_covers_the_model_and_names_its_sources() -> None:
    from kernelsage.knowledge import builtin_pack, pack_items

    pack = dict(builtin_pack("ascend"))
    assert sorted(pack) == ["debugging_guide.md", "quick_reference.md", "worked_example.md"]
    assert all("Written for kernelsage from" in text for text in pack.values())
    sections = {item.metadata["section"] for item in pack_items(backend="ascend")}
    for topic in ("The AI Core: Cube and Vector units", "Memory hierarchy and sizes", "Double buffering",
                  "GlobalTensor, LocalTensor, TPipe and TQue", "DataCopy and 32-byte alignment", "Tiling on the host",
                  "Compile errors: read the first one", "Device faults (runtime errors)"):
        assert topic in sections


def test_builds_of_one_candidate_stored_at_once_leave_one_intact_artifact(tmp_path: Path) -> None:
    """Threads of one process finishing the same build store it side by side: no shared partial file."""
    from concurrent.futures import ThreadPoolExecutor

    from kernelsage.tools.ascend.store import AscendCache

    built = tmp_path / "build"
    (built / "op").mkdir(parents=True)
    (built / "kernelsage_ascend_candidate.so").write_bytes(b"\x7fELF" + bytes(range(256)) * 64)
    (built / "op" / "attrs.json").write_text("[]")
    cache = AscendCache(tmp_path / "cache")
    with ThreadPoolExecutor(8) as pool:
        artifacts = list(pool.map(lambda _: cache.store("k", built), range(16)))
    assert len({a.sha256 for a in artifacts}) == 1 and all(AscendCache.intact(a) for a in artifacts)
    assert sorted(p.name for p in (tmp_path / "cache" / "k").iterdir()) == ["artifact"]


@pytest.mark.parametrize("bind_missing_path", [False, True])
def test_blame_for_a_device_run_follows_whether_the_sandbox_started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     request: pytest.FixtureRequest,
                                                                     hidden_python: list[str],
                                                                     bind_missing_path: bool) -> None:
    """Whether the sandboxed runner started is told by the runner itself, before any candidate code runs: a
    sandbox bubblewrap could not set up (here: a path to bind that does not exist) is the harness's failure,
    and a runner that started reports for itself (here: no torch_npu, so no NPU runtime)."""
    import dataclasses
    import sys
    import tempfile

    from kernelsage.tools.ascend import jobs
    from kernelsage.tools.ascend.python_mirror import PythonMirror
    from kernelsage.tools.ascend.sandboxing import python_paths
    from kernelsage.tools.ascend.store import tree_digest
    from kernelsage.tools.isolation import detect

    isolation = detect()
    if not isolation.available:
        pytest.skip(f"needs bubblewrap: {isolation.problem}")
    hidden = hidden_python
    mirror = PythonMirror()  # as the backend does for a Python under /root
    request.addfinalizer(mirror.close)
    tmp_path.chmod(0o755)  # the sandbox's own user must reach the job directory, as the backend arranges
    for parent in tmp_path.parents:
        if parent == Path(tempfile.gettempdir()):
            break
        parent.chmod(parent.stat().st_mode | 0o111)
    artifact = tmp_path / "artifact"
    artifact.mkdir()
    (artifact / "kernelsage_ascend_candidate.so").write_bytes(b"\x7fELF not a library")
    job = tmp_path / "job"
    job.mkdir()
    job.chmod(0o777)
    monkeypatch.chdir(job)
    payload = {"isolation": dataclasses.asdict(isolation), "env": {}, "device": 0, "custom_opp": "",
               "artifact": str(artifact), "artifact_sha256": tree_digest(artifact),
               "read_only": [*(p for p in python_paths() if p not in hidden),
                             *(["/no/such/path/anywhere"] if bind_missing_path else [])],
               "mirrored": mirror.binds(hidden, sys.path, isolation.user),
               "limits": {"wall_s": 60.0, "memory_bytes": 8 << 30, "cpu_s": 60, "file_bytes": 1 << 30}}
    run = jobs.run_device(payload, {"mode": "verify"}, sandbox=True)
    assert run.sandbox_started is not bind_missing_path, run.stderr_tail
    status, message = verdicts.device_failure(run.result, run.returncode, run.timed_out, run.stderr_tail, 60.0,
                                              run.sandbox_started)
    assert status is Status.HARNESS_ERROR
    assert ("could not start" in message) is bind_missing_path
    if not bind_missing_path:
        assert "NPU runtime did not start" in message
