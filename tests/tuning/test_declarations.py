"""Reading tunables: KS_TUNABLE lines of a cpu kernel and the triton.Config list of a Triton autotune, and
applying one configuration to a candidate's files. Malformed declarations are one clear error line."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelsage.tools.triton.source_check import check_source
from kernelsage.tuning.cpu_tunables import TUNING_HEADER, apply_cpu_config, cpu_space, parse_cpu_tunables
from kernelsage.tuning.space import (
    Tunable,
    TuningError,
    describe,
    grid_space,
    listed_space,
    neighbours,
    probes,
)
from kernelsage.tuning.triton_tunables import apply_triton_config, find_autotune, triton_space

TOOLS = Path(__file__).resolve().parents[2] / "src" / "kernelsage" / "tools"
CPU_EXAMPLES = TOOLS / "cpu" / "examples"
TRITON_TUNABLE = TOOLS / "triton" / "examples" / "tunable"


def test_cpu_declarations_are_read_in_order_with_lines_and_defaults() -> None:
    source = ('#include "kernelsage_cpu.h"\n'
              "// KS_TUNABLE(IN_A_COMMENT, 1, 2)\n"
              "#define KS_TUNABLE(name, ...) something\n"
              "KS_TUNABLE(BLOCK_M, 64, 32, 128);\n"
              '  const char* s = "KS_TUNABLE(IN_A_STRING, 1)";\n'
              "/* KS_TUNABLE(IN_A_BLOCK,\n 1) */ KS_TUNABLE( UNROLL , 0x4, 1, -2 );\n")
    assert parse_cpu_tunables(source) == [Tunable("BLOCK_M", (64, 32, 128), 4), Tunable("UNROLL", (4, 1, -2), 7)]


@pytest.mark.parametrize(("declaration", "problem"), [
    ("KS_TUNABLE(BLOCK)", "list the allowed values"),
    ("KS_TUNABLE(BLOCK, 32, big)", "'big' is not an integer literal"),
    ("KS_TUNABLE(BLOCK, 32, 1.5)", "'1.5' is not an integer literal"),
    ("KS_TUNABLE(BLOCK, 32, 64, 32)", "a value is listed twice"),
    ("KS_TUNABLE(2BLOCK, 32)", "must be the parameter's name"),
    ("KS_TUNABLE(BLOCK, 32, 64\nint ks_kernel(const ks_tensor* inputs);", "is not closed"),
    ("KS_TUNABLE(BLOCK,\n 32, 64,\n x)", r"KS_TUNABLE\(BLOCK, 32, 64, x\): 'x' is not"),
    ("KS_TUNABLE(BLOCK, 32);\nKS_TUNABLE(BLOCK, 64);", "declares BLOCK more than once"),
])
def test_a_malformed_cpu_declaration_is_one_line_naming_the_file_and_problem(declaration: str, problem: str) -> None:
    with pytest.raises(TuningError, match=problem) as caught:
        parse_cpu_tunables("int x;\n" + declaration + "\n", "k.cpp")
    assert "\n" not in str(caught.value) and str(caught.value).startswith("k.cpp")


def test_a_cpu_kernel_without_tunables_says_how_to_declare_them() -> None:
    with pytest.raises(TuningError, match="no tunable parameters declared: add KS_TUNABLE"):
        cpu_space({"kernel.cpp": (CPU_EXAMPLES / "l1_relu.cpp").read_text()})
    with pytest.raises(TuningError, match=r"brings its own ks_tuning\.h"):
        cpu_space({"kernel.cpp": "KS_TUNABLE(A, 1, 2);", TUNING_HEADER: ""})


def test_a_cpu_configuration_is_applied_by_a_generated_header() -> None:
    files = {"kernel.cpp": (CPU_EXAMPLES / "tunable" / "l3_matmul.cpp").read_text()}
    space = cpu_space(files)
    assert [p.name for p in space.parameters] == ["BLOCK_K", "BLOCK_J", "ROWS"]
    assert space.size == 5 * 4 * 4 and space.default == (("BLOCK_K", 64), ("BLOCK_J", 256), ("ROWS", 4))
    applied = apply_cpu_config(files, (("BLOCK_K", 16), ("BLOCK_J", 64), ("ROWS", 1)))
    assert applied["kernel.cpp"] == files["kernel.cpp"]
    assert "#define KS_TUNE_BLOCK_K KS_TUNED(16)\n" in applied[TUNING_HEADER]
    assert "#define KS_TUNE_ROWS KS_TUNED(1)\n" in applied[TUNING_HEADER]


def test_triton_configs_are_read_with_ast_and_launch_keywords_are_parameters() -> None:
    files = {"kernel.py": (TRITON_TUNABLE / "l2_softmax.py").read_text()}
    space = triton_space(files)
    assert [describe(c) for c in space.configs] == ["ROWS=1 num_warps=4", "ROWS=2 num_warps=4", "ROWS=4 num_warps=8"]
    applied = apply_triton_config(files, space.configs[2])["kernel.py"]
    assert len(find_autotune(applied).entries) == 1 and 'triton.Config({"ROWS": 4}, num_warps=8)' in applied
    assert check_source(applied) == []  # still a candidate the triton backend accepts


AUTOTUNED = """import triton
import triton.language as tl
CONFIGS = [triton.Config({"B": 16}), triton.Config({"B": 32})]


@triton.autotune(configs={configs}, key=["n"])
@triton.jit
def _kernel(x_ptr, n, B: tl.constexpr):
    pass
"""


@pytest.mark.parametrize(("configs", "problem"), [
    ('[triton.Config({"B": 16}), triton.Config({"C": 16})]', "every configuration must set the same parameters"),
    ('[triton.Config({"B": 16.5})]', "must map names to integers"),
    ('[triton.Config({"B": size})]', "must be literals"),
    ("[]", "configs list is empty"),
    ("make_configs()", "must be a list literal"),
])
def test_a_malformed_autotune_list_is_one_clear_line(configs: str, problem: str) -> None:
    with pytest.raises(TuningError, match=problem) as caught:
        triton_space({"kernel.py": AUTOTUNED.replace("{configs}", configs)})
    assert "\n" not in str(caught.value)


def test_a_module_level_config_list_is_followed_and_a_plain_kernel_has_no_tunables() -> None:
    assert triton_space({"kernel.py": AUTOTUNED.replace("{configs}", "CONFIGS")}).size == 2
    with pytest.raises(TuningError, match="no tunable parameters declared: decorate"):
        triton_space({"kernel.py": (TOOLS / "triton" / "examples" / "l2_softmax.py").read_text()})


def test_neighbours_move_one_parameter_nearest_values_first() -> None:
    space = grid_space([Tunable("A", (64, 32, 128, 16)), Tunable("B", (1, 2))])
    assert neighbours(space, space.default) == [(("A", 32), ("B", 1)), (("A", 128), ("B", 1)), (("A", 64), ("B", 2)),
                                                (("A", 16), ("B", 1))]  # two steps from 64 by size: last
    listed = listed_space([{"A": 1, "B": 1}, {"A": 4, "B": 2}, {"A": 2, "B": 1}])
    assert neighbours(listed, listed.default) == [(("A", 2), ("B", 1))]  # 2 is next to 1 among A's values
    assert neighbours(listed, (("A", 4), ("B", 2))) == []  # no configuration differs from it in one parameter


def test_the_first_probes_span_each_parameters_range_before_refining() -> None:
    space = grid_space([Tunable("LANES", (1, 2, 4, 8, 16)), Tunable("CHUNK", (4, 1, 2, 8)), Tunable("REREAD", (0, 1))])
    first = probes(space, space.default)
    assert sorted(first) == sorted(neighbours(space, space.default))  # the same configurations, another order
    # each parameter's farthest value, then its nearest, then its next farthest...; parameters in turn
    assert [dict(c) for c in first[:6]] == [
        {"LANES": 16, "CHUNK": 4, "REREAD": 0}, {"LANES": 1, "CHUNK": 1, "REREAD": 0},
        {"LANES": 1, "CHUNK": 4, "REREAD": 1}, {"LANES": 2, "CHUNK": 4, "REREAD": 0},
        {"LANES": 1, "CHUNK": 2, "REREAD": 0}, {"LANES": 8, "CHUNK": 4, "REREAD": 0}]  # CHUNK: 1 two steps, 2 one


def test_a_configuration_is_cut_at_the_right_place_after_non_ascii_text() -> None:
    source = AUTOTUNED.replace("{configs}", '[triton.Config({"B": 16}), triton.Config({"B": 32})]').replace(
        "@triton.autotune", "# tile size, µs matter\n@triton.autotune").replace('key=["n"])', 'key=["n"])  # ✓')
    applied = apply_triton_config({"kernel.py": source}, (("B", 32),))["kernel.py"]
    assert 'configs=[triton.Config({"B": 32})], key=["n"])  # ✓' in applied and "µs" in applied
