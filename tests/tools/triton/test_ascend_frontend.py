"""The npu-frontend device: triton-ascend's compiler on this machine (no CANN, no NPU), in the runner's sandbox.

Real subprocesses and the real sandbox: a sandbox worker's job starts triton-ascend's interpreter (its own
virtual environment, .venv-triton-ascend, which scripts/install.sh makes; or KERNELSAGE_TRITON_ASCEND_PYTHON)
under bubblewrap and the runner's seccomp filter, which imports the candidate, records its launches on the
cases' shapes and compiles each kernel through ast-to-ttir, ttir and ttadapter, stopping before npubin.
"""

from __future__ import annotations

import socket
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.tools.triton.conftest import HERE, unchecked_artifact

from kernelsage.tasks.model import Task
from kernelsage.tools.isolation import Isolation, detect
from kernelsage.tools.results import Candidate, Status
from kernelsage.tools.sandbox import Limits
from kernelsage.tools.triton import ascend_frontend
from kernelsage.tools.triton.backend import TritonBackend
from kernelsage.tools.triton.source_check import npu_problems

EXAMPLES = Path(ascend_frontend.__file__).parent / "examples"
KERNELS, ATTACKS = HERE / "kernels", HERE / "attacks"
NOTE = "npubin needs CANN (bishengir-compile not found): not compiled here"

_found = ascend_frontend.probe(ascend_frontend.interpreter_path())
needs_triton_ascend = pytest.mark.skipif(not _found.usable,
                                         reason=f"npu-frontend tests need triton-ascend: {_found.problem}")


@pytest.fixture(scope="module")
def frontend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonBackend]:
    if not detect().available:
        pytest.skip(f"no bubblewrap here: {detect().problem}")
    backend = TritonBackend(device="npu-frontend", cache_dir=tmp_path_factory.mktemp("frontend-builds"),
                            run_limits=Limits(wall_s=120, cpu_s=240))
    yield backend
    backend.close()


def compile_file(backend: TritonBackend, path: Path, task_id: str = "l1_relu"):
    return backend.compile(Candidate(task_id=task_id, files={"kernel.py": path.read_text()}))


def marked_line(path: Path) -> int:
    """The line of `path` that carries the `# ERROR` marker."""
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if line.rstrip().endswith("# ERROR"))


@needs_triton_ascend
def test_a_correct_kernel_compiles_through_the_front_end_and_stops_where_cann_is_needed(frontend, l1_relu) -> None:
    compiled = compile_file(frontend, EXAMPLES / "l1_relu.py")
    assert compiled.ok and compiled.status is Status.OK, compiled.log
    assert compiled.artifact is not None and not compiled.errors
    assert compiled.log.startswith("compiled through ttadapter") and NOTE in compiled.log, compiled.log
    # one specialisation per dtype of l1_relu's cases (float32 and float16), each through every stage before npubin
    assert "x_ptr: *fp32" in compiled.log and "x_ptr: *fp16" in compiled.log
    assert compiled.log.count("compiled through ttadapter, stopped before npubin") == 2
    assert "characters of ttadapter IR" in compiled.log  # the adapter's output: linalg/HIVM IR, a few KB
    # nothing runs on this device, and it says so
    verified = frontend.verify(compiled.artifact, l1_relu)
    assert not verified.correct and verified.status is Status.HARNESS_ERROR and "compiles only" in verified.message
    profiled = frontend.profile(compiled.artifact, l1_relu)
    assert not profiled.ok and not profiled.timed and "compiles only" in profiled.message


@pytest.mark.parametrize("example", ["l2_softmax", "l3_matmul"])
@needs_triton_ascend
def test_reference_kernels_with_reductions_and_dots_compile_through_the_front_end(frontend, example) -> None:
    compiled = compile_file(frontend, EXAMPLES / f"{example}.py", task_id=example)
    assert compiled.ok, compiled.log
    assert NOTE in compiled.log


@pytest.mark.parametrize(("kernel", "words"), [
    ("ascend_dot_1d.py", "Both inputs must be either 2D or 3D"),
    ("ascend_wrong_op.py", "has no attribute 'relu'"),
])
@needs_triton_ascend
def test_a_front_end_error_is_a_compile_error_at_its_line_in_kernel_py(frontend, kernel, words) -> None:
    path = KERNELS / kernel
    compiled = compile_file(frontend, path)
    assert compiled.status is Status.COMPILE_ERROR and not compiled.ok and compiled.artifact is None
    first = compiled.errors[0]
    assert (first.file, first.line, first.severity) == ("kernel.py", marked_line(path), "error"), compiled.log
    assert first.column > 0 and words in first.message and "ast-to-ttir" in first.message
    assert compiled.log.startswith(f"kernel.py:{first.line}:{first.column}: error: "), compiled.log


@needs_triton_ascend
def test_an_error_in_a_called_jit_function_names_the_call_site(frontend) -> None:
    path = KERNELS / "ascend_dot_1d.py"
    compiled = compile_file(frontend, path)
    call = next(n for n, line in enumerate(path.read_text().splitlines(), 1) if "_square(x), mask" in line)
    assert f"in @triton.jit _square; called from _kernel at kernel.py:{call}" in compiled.errors[0].message


@needs_triton_ascend
def test_an_error_in_ks_kernel_itself_is_located_at_the_launch(frontend) -> None:
    path = KERNELS / "ascend_bad_launch.py"
    compiled = compile_file(frontend, path)
    assert compiled.status is Status.COMPILE_ERROR
    assert compiled.errors[0].line == marked_line(path) and "SCALE" in compiled.errors[0].message


@needs_triton_ascend
def test_a_task_the_backend_cannot_find_is_the_harness_s_problem(frontend) -> None:
    compiled = frontend.compile(Candidate(task_id="no_such_task", files={"kernel.py": (EXAMPLES / "l1_relu.py")
                                                                         .read_text()}))
    assert compiled.status is Status.HARNESS_ERROR and "no_such_task" in compiled.log


def hostile_source(secret: Path, port: int) -> str:
    return ((ATTACKS / "frontend_escape.py").read_text().replace("@SECRET_FILE@", str(secret))
            .replace("@SECRET_VALUE@", "s3cr3t-value").replace("@PORT@", str(port)))


@needs_triton_ascend
def test_a_hostile_candidate_imported_by_the_front_end_is_contained(frontend, l1_relu, tmp_path,
                                                                     monkeypatch) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read")
    monkeypatch.setenv("KERNELSAGE_TEST_SECRET", "s3cr3t-value")
    accepted: list[object] = []
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        threading.Thread(target=lambda: accepted.append(server.accept()), daemon=True).start()
        source = hostile_source(secret, server.getsockname()[1])
        # as if it had fooled the source check: only the sandbox stands in its way
        compiled = frontend.frontend(unchecked_artifact(source, tmp_path), l1_relu)
    # it compiles an honest ReLU only when every probe failed
    assert compiled.status is Status.OK, compiled.log
    assert not accepted


@needs_triton_ascend
def test_the_hostile_candidate_finds_the_host_without_the_sandbox(l1_relu, tmp_path, tmp_path_factory) -> None:
    """The control: unisolated (the unsafe escape hatch), the same candidate reads the host file and says so, so
    the OK above is the sandbox's doing."""
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with TritonBackend(device="npu-frontend", cache_dir=tmp_path_factory.mktemp("unsafe-builds"),
                           isolation=Isolation("none", problem="test control"), unsafe_no_isolation=True,
                           run_limits=Limits(wall_s=120, cpu_s=240)) as unsafe:
            compiled = unsafe.frontend(unchecked_artifact(hostile_source(secret, 9), tmp_path), l1_relu)
    assert compiled.status is Status.COMPILE_ERROR, compiled.log
    assert "kernelsage-attack found" in compiled.errors[0].message and f"read {secret}" in compiled.errors[0].message
    assert "a socket" not in compiled.errors[0].message  # the seccomp filter still refuses sockets


@needs_triton_ascend
def test_the_task_shapes_reach_the_launch_as_signatures_and_grids(l1_relu: Task) -> None:
    cases, skipped = ascend_frontend.task_cases(l1_relu)
    assert not skipped and [c["name"] for c in cases] == [*(c.name for c in l1_relu.cases), l1_relu.perf_case.name]
    assert cases[0]["inputs"][0]["dtype"] == "float32" and cases[0]["outputs"][0]["shape"]


@needs_triton_ascend
def test_every_configuration_of_an_autotuned_kernel_is_compiled(frontend) -> None:
    compiled = compile_file(frontend, KERNELS / "ascend_autotuned.py")
    assert compiled.ok, compiled.log
    assert "4 kernel specialisations" in compiled.log  # BLOCK 256 and 1024, for float32 and float16
    assert "BLOCK=256" in compiled.log and "BLOCK=1024" in compiled.log


@pytest.mark.parametrize("kernels", [[{"signature": 5}], [{"stages": 7}], [{"constants": [1, 2]}], "kernels", 5, None,
                                     [{"stages": ["ttir", 3], "seconds": "x", "ir_chars": None}]])
@needs_triton_ascend
def test_a_report_forged_by_the_candidate_is_feedback_not_a_crash(kernels) -> None:
    # the report comes from the candidate's own process: any shape of it must end as a CompileResult
    artifact = ascend_frontend.Artifact(backend="triton", path="/nowhere", key="k", sha256="s")
    result = ascend_frontend.compile_result({"report": {"errors": [], "kernels": kernels}, "cases": ["vec"]},
                                            artifact, 1.0, 10.0)
    assert result.status is Status.OK and result.log.startswith("compiled through")


# What cannot run on an Ascend NPU is refused before triton-ascend's front end reports anything ----------------

INLINE_ASM = """import triton
import triton.language as tl


@triton.jit
def _kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    y = tl.inline_asm_elementwise("max.f32 $0, $1, 0f00000000;", "=r,r", [x], dtype=tl.float32, is_pure=True,
                                  pack=1)
    tl.store(y_ptr + offs, y, mask=offs < n)


def ks_kernel(inputs, outputs, attrs):
    n = outputs[0].numel()
    _kernel[(triton.cdiv(n, 1024),)](inputs[0], outputs[0], n, BLOCK=1024)
"""


def test_inline_assembly_cuda_modules_and_fp64_are_refused_at_their_lines() -> None:
    source = INLINE_ASM.replace("import triton.language as tl\n", "import triton.language as tl\n"
                                "from triton.language.extra.hip import libdevice as amd\n")
    source = source.replace("tl.store(y_ptr + offs, y,", "tl.store(y_ptr + offs, y.to(tl.float64),")
    problems = npu_problems(source)
    assert [(p.line, p.message.split(": ", 1)[1].split(" cannot")[0]) for p in problems] == [
        (3, "triton.language.extra.hip"), (10, "triton.language.inline_asm_elementwise"),
        (12, "triton.language.float64")]
    assert all(" cannot run on an Ascend NPU: " in p.message and not p.forbidden for p in problems)
    assert npu_problems((KERNELS / "ascend_cuda_libdevice.py").read_text())[0].line == \
        marked_line(KERNELS / "ascend_cuda_libdevice.py")
    for example in ("l1_relu", "l2_softmax", "l3_matmul"):  # what runs there is left alone
        assert npu_problems((EXAMPLES / f"{example}.py").read_text()) == []


@needs_triton_ascend
@pytest.mark.parametrize("kernel", ["inline_asm", "ascend_cuda_libdevice.py"])
def test_the_front_end_refuses_what_cannot_run_on_an_npu_with_one_line(frontend, tmp_path, kernel) -> None:
    path = KERNELS / kernel if kernel.endswith(".py") else tmp_path / "kernel.py"
    if kernel == "inline_asm":
        path.write_text(INLINE_ASM)
    compiled = compile_file(frontend, path)
    assert compiled.status is Status.COMPILE_ERROR and not compiled.ok and compiled.artifact is None
    assert len(compiled.errors) == 1 and "compiled through" not in compiled.log
    assert compiled.log.count("\n") == 0 and "cannot run on an Ascend NPU" in compiled.log, compiled.log
