"""Reading an Ascend kernel's tunables (the cpu dialect's KS_TUNABLE, declared where the host computes the tiling)
and where each route's ks_tuning.h goes; what cannot be tuned is one clear error line."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelsage.tuning.ascend_tunables import apply_ascend_config, ascend_space
from kernelsage.tuning.cpu_tunables import tuning_header
from kernelsage.tuning.dialects import dialect_for
from kernelsage.tuning.space import TuningError

EXAMPLE = Path(__file__).resolve().parents[2] / "src/kernelsage/tools/ascend/examples/tunable/l1_relu/kernel.cpp"
HOST = 'OP_ADD(ReluCustom);\n#include "kernelsage_tuning.h"\nKS_TUNABLE(TILE_LEN, 2048, 512);\n'
KERNEL = "extern \"C\" __global__ __aicore__ void relu_custom(GM_ADDR x, GM_ADDR y, GM_ADDR w, GM_ADDR t) {}\n"
OPGEN = {"op_host/relu_custom.cpp": HOST, "op_kernel/relu_custom.cpp": KERNEL}


def test_the_direct_example_declares_its_tiling_and_gets_the_header_beside_kernel_cpp() -> None:
    files = {"kernel.cpp": EXAMPLE.read_text()}
    space, apply = dialect_for("ascend")
    declared = space(files)
    assert [(p.name, p.values) for p in declared.parameters] == [("TILE_KB", (32, 4, 8, 16, 40)),
                                                                   ("BLOCKS_PER_CORE", (1, 2, 4))]
    assert declared.size == 15 and declared.default == (("TILE_KB", 32), ("BLOCKS_PER_CORE", 1))
    applied = apply(files, (("TILE_KB", 8), ("BLOCKS_PER_CORE", 4)))
    assert applied["kernel.cpp"] == files["kernel.cpp"]
    assert applied["ks_tuning.h"] == tuning_header((("TILE_KB", 8), ("BLOCKS_PER_CORE", 4)))
    assert "#define KS_TUNE_BLOCKS_PER_CORE KS_TUNED(4)\n" in applied["ks_tuning.h"]


def test_an_msopgen_candidate_tunes_op_host_and_the_header_goes_there() -> None:
    assert ascend_space(OPGEN).configs == ((("TILE_LEN", 2048),), (("TILE_LEN", 512),))
    applied = apply_ascend_config(OPGEN, (("TILE_LEN", 512),))
    assert set(applied) == {*OPGEN, "op_host/ks_tuning.h"}
    assert "#define KS_TUNE_TILE_LEN KS_TUNED(512)" in applied["op_host/ks_tuning.h"]


@pytest.mark.parametrize(("files", "problem"), [
    ({"op_kernel/relu_custom.cpp": KERNEL},
     "kernel-only candidate .* op_host as given, so its tiling cannot be tuned: set KERNELSAGE_ASCEND_TEMPLATE_MODE"),
    ({**OPGEN, "op_kernel/relu_custom.cpp": KERNEL + "KS_TUNABLE(UNROLL, 1, 2);\n"},
     r"op_kernel/relu_custom\.cpp:2: KS_TUNABLE belongs in op_host"),
    ({**OPGEN, "op_host/ks_tuning.h": ""}, r"brings its own op_host/ks_tuning\.h"),
    ({"kernel.cpp": "int ks_launch();\n", "ks_tuning.h": ""}, r"brings its own ks_tuning\.h"),
    ({"kernel.cpp": "int ks_launch();\n"}, r"no tunable parameters declared: .*see kernelsage_tuning\.h"),
    ({"main.cpp": "KS_TUNABLE(A, 1, 2);\n"}, "not an Ascend candidate: a direct-launch candidate has exactly one"),
])
def test_what_cannot_be_tuned_is_one_line(files: dict[str, str], problem: str) -> None:
    with pytest.raises(TuningError, match=problem) as caught:
        ascend_space(files)
    assert "\n" not in str(caught.value)
