"""Both build routes end to end against the STAND-IN toolchain (see standin/README.md): the files laid out,
the command lines and their order, the cached artifact, and every class of build failure parsed into the
same structured errors the cpu backend returns."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from kernelsage.tools.ascend.backend import AscendBackend
from kernelsage.tools.ascend.glue import MODULE_FILE
from kernelsage.tools.results import Candidate, Status

DIRECT_KERNEL = """#include "kernel_operator.h"
#include "kernelsage_ascend.h"
extern "C" __global__ __aicore__ void relu(GM_ADDR x, GM_ADDR y, uint32_t n) {}
int ks_launch(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs, const ks_npu* npu) {
    relu<<<npu->aiv_cores, nullptr, npu->stream>>>((GM_ADDR)inputs[0].data, (GM_ADDR)outputs[0].data, 1);
    return 0;
}
"""
OP_HOST = """#include "add_custom_tiling.h"
#include "register/op_def_registry.h"
namespace ops {
class AddCustom : public OpDef {
public:
    explicit AddCustom(const char* name) : OpDef(name) {
        this->Input("x").ParamType(REQUIRED).DataType({ge::DT_FLOAT16}).Format({ge::FORMAT_ND});
        this->Input("y").ParamType(REQUIRED).DataType({ge::DT_FLOAT16}).Format({ge::FORMAT_ND});
        this->Output("z").ParamType(REQUIRED).DataType({ge::DT_FLOAT16}).Format({ge::FORMAT_ND});
        this->Attr("alpha").AttrType(OPTIONAL).Float(1.0);
        this->AICore().SetTiling(optiling::TilingFunc);
        this->AICore().AddConfig("ascend910b");
    }
};
OP_ADD(AddCustom);
}
"""
OP_KERNEL = """#include "kernel_operator.h"
extern "C" __global__ __aicore__ void add_custom(GM_ADDR x, GM_ADDR y, GM_ADDR z, GM_ADDR workspace, GM_ADDR tiling) {}
"""


def opgen(host: str = OP_HOST, kernel: str = OP_KERNEL) -> dict[str, str]:
    return {"op_host/add_custom.cpp": host, "op_kernel/add_custom.cpp": kernel,
            "op_host/add_custom_tiling.h": "#pragma once\n"}


def calls_of(backend_result) -> list[str]:
    """The stand-in tools' record of the build, which the stand-in linker wrote into the module."""
    return (Path(backend_result.artifact.path) / MODULE_FILE).read_text().splitlines()


def test_direct_route_builds_with_bisheng_release_flags_and_caches(standin_backend: AscendBackend) -> None:
    result = standin_backend.compile(Candidate(task_id="l1_relu", files={"kernel.cpp": DIRECT_KERNEL}))
    assert result.ok and result.status is Status.OK and result.artifact is not None, result.log
    assert result.log.startswith("target: Ascend910B3 (dav-2201), CANN 8.0.RC3.standin")
    calls = [line for line in calls_of(result) if line.startswith(("bisheng", "g++"))]
    compile_call, check_call, link_call = calls
    assert compile_call.startswith("bisheng -xasc --npu-arch=dav-2201 -std=c++17 -O2 -DNDEBUG -fPIC -I.")
    assert compile_call.endswith("-c kernel.cpp -o kernel.o")
    assert f"-I{standin_backend.toolchain.ascend_home}/compiler/tikcpp/tikcfw " in compile_call  # tikcpp layout
    assert check_call.startswith("bisheng -shared kernel.o -o kernel_runtime_check.so") and "--no-undefined" in check_call
    assert link_call.startswith(f"bisheng -shared kernel.o glue_direct.o -o {MODULE_FILE}")
    for library in ("-lascendcl", "-lruntime", "-lascendc_runtime", "-lregister", "-lprofapi", "-ldl"):
        assert library in check_call and library in link_call
    assert "-ltorch_npu" in link_call and "-ltorch_npu" not in check_call
    again = standin_backend.compile(Candidate(task_id="l1_relu", files={"kernel.cpp": DIRECT_KERNEL}))
    assert again.cached and again.artifact == result.artifact


def test_direct_route_compile_error_is_parsed_like_the_cpu_backend(standin_backend: AscendBackend) -> None:
    source = DIRECT_KERNEL + "// STANDIN_DIAGNOSTICS:undeclared\n"
    result = standin_backend.compile(Candidate(task_id="l1_relu", files={"kernel.cpp": source}))
    assert result.status is Status.COMPILE_ERROR and result.artifact is None
    errors = [e for e in result.errors if e.severity == "error"]
    assert [(e.file, e.line, e.column, e.message) for e in errors] == [
        ("kernel.cpp", 12, 9, "use of undeclared identifier 'tileLen'")]
    assert any(e.severity == "warning" and e.line == 20 for e in result.errors)


def test_direct_route_link_error_names_the_missing_entry_point(standin_backend: AscendBackend) -> None:
    source = DIRECT_KERNEL.replace("int ks_launch(", "int ks_launch_typo(") + "// STANDIN_LINK:undefined_launch\n"
    result = standin_backend.compile(Candidate(task_id="l1_relu", files={"kernel.cpp": source}))
    assert result.status is Status.COMPILE_ERROR
    assert result.errors[0].message.startswith("undefined symbol: ks_launch (referenced by glue_direct.cpp)")


def test_msopgen_route_builds_installs_and_generates_the_aclnn_glue(standin_backend: AscendBackend) -> None:
    result = standin_backend.compile(Candidate(task_id="add", files=opgen()))
    assert result.ok and result.artifact is not None, result.log
    root = Path(result.artifact.path)
    assert (root / "opp" / "vendors" / "customize" / "op_api" / "lib" / "libcust_opapi.so").read_text().strip() \
        == "add_custom"
    assert json.loads((root / "attributes.json").read_text()) == ["alpha"]  # the aclnn API's attribute order
    lines = calls_of(result)
    tools = [line.split()[0] for line in lines if line.split() and line.split()[0] in ("msopgen", "cmake", "g++")]
    assert tools == ["msopgen", "cmake", "cmake", "g++", "g++"]
    # upstream's environment for build.sh: the caller's ASCEND_CUSTOM_OPP_PATH (set in standin_environ) removed
    assert "cmake saw ASCEND_CUSTOM_OPP_PATH=<unset>" in lines
    assert next(line for line in lines if line.startswith("msopgen")) == \
        "msopgen gen -i op.json -c ai_core-Ascend910B3 -lan cpp -out project"
    glue = "\n".join(lines)
    assert "EXEC_NPU_CMD(aclnnAddCustom, input_0, input_1, arg_alpha, output_0);" in glue
    assert "const double& attr_alpha" in glue


def test_a_package_that_installs_where_runs_do_not_look_fails_the_build(standin_backend: AscendBackend) -> None:
    result = standin_backend.compile(Candidate(task_id="add", files=opgen(
        host=OP_HOST + "// STANDIN_VENDOR_ELSEWHERE\n")))
    assert result.status is Status.COMPILE_ERROR and result.artifact is None
    assert next(e.message for e in result.errors if e.severity == "error") == (
        "the custom op package did not install into opp/vendors/customize (no op_api/lib/libcust_opapi.so there)")


def test_msopgen_ccec_error_points_at_the_candidates_kernel_file(standin_backend: AscendBackend) -> None:
    result = standin_backend.compile(Candidate(task_id="add", files=opgen(
        kernel=OP_KERNEL + "// STANDIN_DIAGNOSTICS:ccec_datacopy\n")))
    assert result.status is Status.COMPILE_ERROR
    first = result.errors[0]
    assert (first.file, first.line, first.column) == ("op_kernel/add_custom.cpp", 8, 5)
    assert "no matching function for call to 'DataCopy'" in first.message
    assert any(e.message.startswith("[op_kernel/CMakeFiles") for e in result.errors[1:])


def test_msopgen_cmake_error_is_one_structured_error(standin_backend: AscendBackend) -> None:
    result = standin_backend.compile(Candidate(task_id="add", files=opgen(
        host=OP_HOST + "// STANDIN_DIAGNOSTICS:cmake_opdef\n")))
    assert result.status is Status.COMPILE_ERROR
    (error,) = [e for e in result.errors if e.severity == "error"]
    assert (error.file, error.line) == ("cmake/func.cmake", 42)
    assert error.message == ("cmake message: op_host/add_custom.cpp: the OpDef of AddCustom registers no AICore "
                             "config")


@pytest.mark.parametrize(("files", "words"), [
    ({"kernel.cpp": DIRECT_KERNEL, "other.cpp": "int x;"}, "exactly one source"),
    ({"op_host/add_custom.cpp": OP_HOST, "op_kernel/sub.cpp": OP_KERNEL}, "same <op>"),
    ({"op_host/add_custom.cpp": OP_HOST.replace("OP_ADD(AddCustom)", "OP_ADD(SubCustom)"),
      "op_kernel/add_custom.cpp": OP_KERNEL}, "does not match the file names"),
])
def test_bad_layouts_are_one_clear_error(standin_backend: AscendBackend, files: dict[str, str], words: str) -> None:
    result = standin_backend.compile(Candidate(task_id="t", files=files))
    assert result.status is Status.COMPILE_ERROR and words in result.errors[0].message


def test_aclnn_calls_in_a_kernel_are_forbidden(standin_backend: AscendBackend) -> None:
    source = DIRECT_KERNEL.replace("return 0;", "aclnnRelu(nullptr, nullptr);\n    return 0;")
    result = standin_backend.compile(Candidate(task_id="l1_relu", files={"kernel.cpp": source}))
    assert result.status is Status.FORBIDDEN and "aclnn" in result.reason


def test_builds_of_different_candidates_run_side_by_side(standin_backend: AscendBackend) -> None:
    results = {}

    def build(tag: str) -> None:
        source = DIRECT_KERNEL.replace("uint32_t n)", f"uint32_t n /* {tag} */)")
        results[tag] = standin_backend.compile(Candidate(task_id="l1_relu", files={"kernel.cpp": source}))

    threads = [threading.Thread(target=build, args=(tag,)) for tag in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(r.ok for r in results.values())
    assert results["a"].artifact.path != results["b"].artifact.path
    spec = json.loads(json.dumps(results["a"].to_dict()))
    assert spec["artifact"]["backend"] == "ascend"


def test_verify_and_profile_without_torch_npu_blame_the_host(standin_backend: AscendBackend,
                                                             hidden_python: list[str]) -> None:
    """The judge's whole path (reference on the CPU, the candidate staged into the job, the device run in
    the sandbox, the verdict) on a host whose Python has no torch_npu: the run cannot start the NPU
    runtime, which is the host's fault, not the candidate's. A Python under /root (`hidden_python`) is
    mirrored for the sandbox, as the backend does."""
    from kernelsage.tasks.loaders import find_task, load_suite

    built = standin_backend.compile(Candidate(task_id="l1_relu", files={"kernel.cpp": DIRECT_KERNEL}))
    assert built.ok and built.artifact is not None
    relu = find_task(load_suite("builtin"), "l1_relu")
    verified = standin_backend.verify(built.artifact, relu, trials=1)
    assert verified.status is Status.HARNESS_ERROR and not verified.correct
    assert "the NPU runtime did not start: ModuleNotFoundError: No module named 'torch_npu'" in verified.message
    assert verified.message.endswith("(on Ascend910B3 (dav-2201), CANN 8.0.RC3.standin)")
    profiled = standin_backend.profile(built.artifact, relu, warmup=1, reps=3)
    assert profiled.status is Status.HARNESS_ERROR and "the reference did not run on the NPU" in profiled.message
