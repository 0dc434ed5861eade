"""`kernelsage tune` on the ascend backend, built by the STAND-IN toolchain (standin/README.md): each configuration's
ks_tuning.h lands beside the host sources in the build (op_host/ of the msopgen project; kernel.cpp's directory on
the direct route), an unlisted value fails the build, and the configuration is part of the build's cache key.

The stand-in tools compile nothing, so this module adds a checking step in front of the stand-in cmake: the
machine's real g++ compiles the msopgen project's op_host sources (-fsyntax-only, C++11) against STAND-IN CANN
op_host headers written here (only the declarations the op_host below uses), and writes the ks_tuning.h it found
into the tools' record (which the stand-in link puts into the module). No NPU is here: the tuner's verify and
profile go to `MadeUpDevice`, whose timings are a made-up cost table of the tiling value found in the built
module. They test that the value reached the build and that the search acts on what it measures; they say
nothing about speed on Ascend hardware (scripts/validate_ascend.sh tunes there)."""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.tools.ascend.standin_cann import environ_for, tikcpp_install

from kernelsage.tasks.loaders import find_task, load_suite
from kernelsage.tools.ascend.backend import AscendBackend
from kernelsage.tools.ascend.glue import MODULE_FILE, HostHeaders
from kernelsage.tools.ascend.toolchain import detect_toolchain
from kernelsage.tools.ascend.tuning_report import render
from kernelsage.tools.isolation import detect
from kernelsage.tools.results import (
    Artifact,
    Candidate,
    CompileResult,
    ProfileResult,
    Status,
    Timing,
    VerifyResult,
)
from kernelsage.tuning import tune
from kernelsage.tuning.ascend_tunables import apply_ascend_config, ascend_space
from kernelsage.tuning.result import TriedConfig, TuningResult

EXAMPLE = Path(__file__).resolve().parents[3] / "src/kernelsage/tools/ascend/examples/tunable/l1_relu/kernel.cpp"
# What the op_host below needs of CANN's register/ headers, declared with the real names (stand-ins: no bodies).
OP_HOST_API = {
    "register/tilingdata_base.h": """#pragma once
#include <cstddef>
#include <cstdint>
#define BEGIN_TILING_DATA_DEF(name) class name { public:
#define TILING_DATA_FIELD_DEF(type, field) \\
    type field##_ = 0; void set_##field(type value) { field##_ = value; } type get_##field() const { return field##_; }
#define END_TILING_DATA_DEF void SaveToBuffer(void* data, size_t capacity); size_t GetDataSize() const; }
#define REGISTER_TILING_DATA_CLASS(op, data) static_assert(sizeof(data) > 0, #op);
""",
    "register/op_def_registry.h": """#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>
namespace ge {
using graphStatus = uint32_t;
constexpr graphStatus GRAPH_SUCCESS = 0;
enum DataType { DT_FLOAT, DT_FLOAT16 };
enum Format { FORMAT_ND };
}
namespace gert {
struct Shape { int64_t GetShapeSize() const; };
struct StorageShape { const Shape& GetOriginShape() const; };
struct TilingData { void* GetData(); size_t GetCapacity() const; void SetDataSize(size_t size); };
struct TilingContext {
    const StorageShape* GetInputShape(size_t index) const;
    void SetBlockDim(uint32_t blocks);
    TilingData* GetRawTilingData();
};
}
namespace ops {
enum Presence { REQUIRED, OPTIONAL, DYNAMIC };
struct OpParamDef {
    OpParamDef& ParamType(Presence presence);
    OpParamDef& DataType(std::vector<ge::DataType> types);
    OpParamDef& Format(std::vector<ge::Format> formats);
};
struct OpAICoreDef {
    OpAICoreDef& SetTiling(ge::graphStatus (*tiling)(gert::TilingContext*));
    OpAICoreDef& AddConfig(const char* soc);
};
class OpDef {
public:
    explicit OpDef(const char* name);
    OpParamDef& Input(const char* name);
    OpParamDef& Output(const char* name);
    OpAICoreDef& AICore();
};
}
#define OP_ADD(op) static ops::op op##_registered(#op)
""",
}
# In front of the stand-in cmake (which it then runs): the real compiler over the project's op_host sources.
CHECKING_CMAKE = """#!/usr/bin/env python3
import glob, os, subprocess, sys
here = os.path.dirname(os.path.abspath(__file__))
done = subprocess.run(["/usr/bin/g++", "-fsyntax-only", "-std=c++11", "-I" + os.path.join(here, "..", "include"),
                       *sorted(glob.glob("op_host/*.cpp"))], capture_output=True, text=True)
if done.returncode != 0:
    sys.stderr.write(done.stderr)
    sys.exit(1)
tuned = open("op_host/ks_tuning.h").read() if os.path.exists("op_host/ks_tuning.h") else "<absent>\\n"
with open("../standin-calls.log", "a") as record:
    record.write("op_host/ks_tuning.h: " + tuned)
os.execv(os.path.join(here, "cmake.standin"), ["cmake", *sys.argv[1:]])
"""
TILING_H = """#include "register/tilingdata_base.h"
namespace optiling {
BEGIN_TILING_DATA_DEF(ReluCustomTilingData)
TILING_DATA_FIELD_DEF(uint32_t, totalLength);
TILING_DATA_FIELD_DEF(uint32_t, tileLength);
END_TILING_DATA_DEF;
REGISTER_TILING_DATA_CLASS(ReluCustom, ReluCustomTilingData)
}
"""
OP_HOST = """#include "relu_custom_tiling.h"
#include "register/op_def_registry.h"
#include "kernelsage_tuning.h"

KS_TUNABLE(TILE_LEN, 2048, 512, 1024, 4096);

namespace optiling {
static ge::graphStatus TilingFunc(gert::TilingContext* context) {
    ReluCustomTilingData tiling;
    tiling.set_totalLength(static_cast<uint32_t>(context->GetInputShape(0)->GetOriginShape().GetShapeSize()));
    tiling.set_tileLength(TILE_LEN);
    context->SetBlockDim(8);
    tiling.SaveToBuffer(context->GetRawTilingData()->GetData(), context->GetRawTilingData()->GetCapacity());
    context->GetRawTilingData()->SetDataSize(tiling.GetDataSize());
    return ge::GRAPH_SUCCESS;
}
}

namespace ops {
class ReluCustom : public OpDef {
public:
    explicit ReluCustom(const char* name) : OpDef(name) {
        this->Input("x").ParamType(REQUIRED).DataType({ge::DT_FLOAT}).Format({ge::FORMAT_ND});
        this->Output("y").ParamType(REQUIRED).DataType({ge::DT_FLOAT}).Format({ge::FORMAT_ND});
        this->AICore().SetTiling(optiling::TilingFunc);
        this->AICore().AddConfig("ascend910b");
    }
};
OP_ADD(ReluCustom);
}
"""
OP_KERNEL = """#include "kernel_operator.h"
extern "C" __global__ __aicore__ void relu_custom(GM_ADDR x, GM_ADDR y, GM_ADDR workspace, GM_ADDR tiling) {
    GET_TILING_DATA(tiling_data, tiling);  // reads tileLength, whatever the configuration
}
"""
FILES = {"op_host/relu_custom.cpp": OP_HOST, "op_host/relu_custom_tiling.h": TILING_H,
         "op_kernel/relu_custom.cpp": OP_KERNEL}
TUNED = re.compile(r"KS_TUNE_TILE_LEN KS_TUNED\((\d+)\)")


@pytest.fixture(scope="module")
def checking_backend(tmp_path_factory: pytest.TempPathFactory, fake_headers: HostHeaders) -> Iterator[AscendBackend]:
    """An ascend backend on a stand-in install whose cmake step first compiles op_host with the real g++."""
    base = Path(tempfile.mkdtemp(prefix="kernelsage-standin-tuning-"))
    home = tikcpp_install(base)
    for name, text in OP_HOST_API.items():
        (home / "include" / name).parent.mkdir(parents=True, exist_ok=True)
        (home / "include" / name).write_text(text)
    (home / "bin" / "cmake").rename(home / "bin" / "cmake.standin")
    (home / "bin" / "cmake").write_text(CHECKING_CMAKE)
    for path in [base, *base.rglob("*")]:
        if not path.is_symlink():  # readable by the sandbox's user, as a real install is
            path.chmod(0o755 if path.is_dir() or path.parent.name == "bin" else 0o644)
    backend = AscendBackend(devices=[0], soc="Ascend910B3", toolchain=detect_toolchain(environ_for(home)),
                            headers=fake_headers, cache_dir=tmp_path_factory.mktemp("ascend-tuning-builds"),
                            build_workers=1, unsafe_no_isolation=not detect().available)
    yield backend
    backend.close()
    shutil.rmtree(base, ignore_errors=True)


def tuned_value(artifact: Artifact) -> int:
    """The TILE_LEN the build saw in op_host/ks_tuning.h, from the tools' record inside the module."""
    found = TUNED.findall((Path(artifact.path) / MODULE_FILE).read_text())
    assert len(found) == 1, "the build did not see exactly one ks_tuning.h setting TILE_LEN"
    return int(found[0])


def timing(ms: float) -> Timing:
    return Timing(mean=ms, median=ms, cv=0.01, minimum=ms * 0.99, warmup=1, reps=10, stdev=ms * 0.01,
                  ci_low=ms * 0.99, ci_high=ms * 1.01)


class MadeUpDevice:
    """The ascend backend's builds (stand-in toolchain), with every verify correct and every profile timed by a
    made-up cost table of the TILE_LEN found in the built module (not a speed on any device)."""

    name = "ascend"
    reps = None  # the tuner's rungs keep the backend's own number of timed calls

    def __init__(self, backend: AscendBackend, cost_ms: dict[int, float]) -> None:
        self.backend, self.cost_ms = backend, cost_ms
        self.builds: list[CompileResult] = []

    def compile(self, candidate: Candidate, task: Any = None) -> CompileResult:
        result = self.backend.compile(candidate, task=task)
        self.builds.append(result)
        return result

    def verify(self, artifact: Artifact, task: Any, **_: Any) -> VerifyResult:
        return VerifyResult(status=Status.OK, correct=True, trials=1)

    def profile(self, artifact: Artifact, task: Any, reps: int | None = None, **_: Any) -> ProfileResult:
        ms = self.cost_ms[tuned_value(artifact)]
        return ProfileResult(status=Status.OK, ok=True, candidate=timing(ms), reference=timing(10.0),
                             speedup=10.0 / ms, output_correct=True)


def test_the_tuner_builds_each_op_host_configuration_with_its_header(checking_backend: AscendBackend) -> None:
    device = MadeUpDevice(checking_backend, {2048: 3.0, 512: 6.0, 1024: 2.0, 4096: 2.5})
    relu = find_task(load_suite("builtin"), "l1_relu")
    result = tune(device, relu, FILES, budget=24)  # type: ignore[arg-type]  # a KernelBackend by its methods
    # the default, then its neighbours coarse before fine (`space.probes`): the farthest, the nearest, the next
    assert [t.values["TILE_LEN"] for t in result.tried] == [2048, 512, 1024, 4096]
    assert all(t.verdict == "correct" for t in result.tried), [t.message for t in result.tried]
    assert result.winner == {"TILE_LEN": 1024} and result.decision.startswith("clearly faster")
    fresh = [b for b in device.builds if not b.cached]
    # one build per configuration, each of its own value (its key covers ks_tuning.h); repeated profiles: cached
    assert sorted(tuned_value(b.artifact) for b in fresh if b.artifact) == [512, 1024, 2048, 4096]
    assert len({b.artifact.key for b in fresh if b.artifact}) == 4 and len(device.builds) > len(fresh)


def test_an_unlisted_op_host_value_fails_the_build(checking_backend: AscendBackend) -> None:
    files = {**FILES, "op_host/ks_tuning.h": "#define KS_TUNE_TILE_LEN KS_TUNED(1000)\n"}
    result = checking_backend.compile(Candidate(task_id="l1_relu", files=files))
    assert result.status is Status.COMPILE_ERROR and result.artifact is None
    errors = [e for e in result.errors if e.severity == "error"]
    assert errors and "static assertion failed: KS_TUNE_TILE_LEN is not a value KS_TUNABLE lists" in errors[0].message
    listed = checking_backend.compile(Candidate(task_id="l1_relu", files=apply_ascend_config(FILES, (("TILE_LEN", 512),))))
    assert listed.ok and listed.artifact is not None and tuned_value(listed.artifact) == 512, listed.log


def test_the_direct_route_places_both_headers_beside_kernel_cpp(ascendc_backend: AscendBackend) -> None:
    """The ascendc stand-in's bisheng preprocesses kernel.cpp for real: kernelsage_tuning.h must resolve beside
    it, and the ks_tuning.h it finds there must be the candidate's (one that stops the preprocessor shows it)."""
    files = {"kernel.cpp": EXAMPLE.read_text()}
    tuned = ascendc_backend.compile(Candidate(task_id="l1_relu", files=apply_ascend_config(
        files, ascend_space(files).configs[-1])))
    assert tuned.ok and tuned.artifact is not None, tuned.log
    stopped = ascendc_backend.compile(Candidate(task_id="l1_relu", files={
        **files, "ks_tuning.h": "#error the tuned header was reached\n"}))
    assert stopped.status is Status.COMPILE_ERROR
    assert any("the tuned header was reached" in e.message for e in stopped.errors), stopped.log


def a_tuning(*tried: TriedConfig) -> dict[str, Any]:
    return TuningResult(task_id="l1_relu", backend="ascend", parameters={"TILE_KB": [32, 8]}, space_size=2,
                        budget=20, default={"TILE_KB": 32}, winner={"TILE_KB": 8},
                        decision="clearly faster than the default (4 paired rounds)", tried=list(tried), compiles=2,
                        profiles=10, gain=(1.3, 1.2, 1.4)).to_dict()


def test_the_validation_report_gives_the_decision_and_fails_only_when_tuning_failed() -> None:
    default = TriedConfig({"TILE_KB": 32}, "correct", True, candidate=timing(2e-5), reference=timing(3e-5))
    faster = TriedConfig({"TILE_KB": 8}, "correct", candidate=timing(1.5e-5), reference=timing(3e-5))
    text, failed = render(a_tuning(default, faster), "")
    assert not failed
    assert "  TILE_KB=8 (winner): correct: 2.00x torch_npu (kernel 15.0 us" in text
    assert "winner: TILE_KB=8: clearly faster than the default (4 paired rounds)" in text
    assert "best found against the default: 1.30x (interval 1.20x to 1.40x)" in text
    wrong = TriedConfig({"TILE_KB": 8}, "incorrect", message="case 2: 17 of 4096 elements differ")
    text, failed = render(a_tuning(default, wrong), "")
    assert failed and "surprise: tuning failed: TILE_KB=8 was incorrect: case 2: 17 of 4096" in text
    text, failed = render(None, "error: the kernel is not correct at its default configuration (TILE_KB=32)")
    assert failed and text.endswith("tuning failed: error: the kernel is not correct at its default configuration "
                                    "(TILE_KB=32)")
