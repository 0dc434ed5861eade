"""The Triton tracks of KernelBench and MultiKernelBench: the same task files, the language declared where each
repository declares it. The fixtures are written here in those layouts, with our own placeholder contents."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernelsage.tasks.loaders import load_suite
from kernelsage.tasks.loaders.tracks import suite_tracks, toml_tables, track_for, track_note

KERNELSAGE = Path(sys.executable).with_name("kernelsage")
TASK = ("import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n\n\n"
        "def get_inputs():\n    return [torch.randn(8, 16)]\n\n\ndef get_init_inputs():\n    return []\n")
# A prompts.toml in KernelBench's shape: shared multi-line text, then one [backends.<language>] table per track.
PROMPTS_TOML = '''[meta]
default_backend = "cuda"

[shared]
text = """
a template whose lines look like tables
[backends.not_a_track]
one_shot_new_arch = "nowhere.py"
"""

[backends.cuda]
backend_display = "placeholder"
one_shot_new_arch = "src/kernelbench/prompts/model_new_ex_add.py"

[backends.triton]
backend_display = "placeholder"  # a comment
one_shot_new_arch = "src/kernelbench/prompts/model_new_ex_add_triton.py"

[precision.fp32]
precision_display = "placeholder"
'''


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def kernelbench(root: Path, layout: str = "toml") -> Path:
    """A KernelBench checkout: KernelBench/level1/ tasks, and the track files of one of its three eras."""
    _write(root / "KernelBench" / "level1" / "19_ReLU.py", TASK)
    if layout == "toml":  # since the package move: src/kernelbench/prompts/prompts.toml
        _write(root / "src" / "kernelbench" / "prompts" / "prompts.toml", PROMPTS_TOML)
        for name in ("model_new_ex_add.py", "model_new_ex_add_triton.py"):
            _write(root / "src" / "kernelbench" / "prompts" / name, "# placeholder\n")
    elif layout == "examples":  # the first Triton backend: an example file per language, no prompts.toml
        _write(root / "src" / "prompts" / "model_new_ex_add.py", "# placeholder\n")
        _write(root / "src" / "prompts" / "model_new_ex_add_triton.py", "# placeholder\n")
    return root


def multikernelbench(root: Path, *, triton: bool = True) -> Path:
    """A MultiKernelBench checkout: reference/<category>/ tasks, backends/ and prompt_generators/ registries."""
    _write(root / "reference" / "activation" / "relu.py", TASK)
    _write(root / "backends" / "cuda_backend.py", "@register_backend('cuda')\nclass Cuda:\n    pass\n")
    _write(root / "prompt_generators" / "cuda_add_shot.py", '@register_prompt("cuda", "add_shot")\nclass P:\n'
                                                            "    pass\n")
    if triton:
        _write(root / "backends" / "triton_backend.py", "@register_backend('triton')\nclass T:\n    pass\n")
        _write(root / "backends" / "triton_ascend_backend.py", "@register_backend('triton_ascend')\nclass A:\n"
                                                               "    pass\n")
        _write(root / "prompt_generators" / "triton_add_shot.py", '@register_prompt("triton", "add_shot")\n'
                                                                  "class P:\n    pass\n")
        _write(root / "prompts" / "triton_new_model_add.py", "# placeholder\n")
    return root


def test_kernelbench_declares_its_triton_track_in_prompts_toml(tmp_path: Path) -> None:
    report = load_suite(kernelbench(tmp_path / "KB"))
    assert [t.language for t in report.tracks] == ["cuda", "triton"]  # a template's text is not a table
    (triton,) = track_for(report.tracks, "triton")
    assert (triton.declared_in, triton.example) == ("src/kernelbench/prompts/prompts.toml",
                                                    "src/kernelbench/prompts/model_new_ex_add_triton.py")
    # wherever --suite points inside the checkout, its tracks are the checkout's
    assert suite_tracks(tmp_path / "KB" / "KernelBench" / "level1", "kernelbench") == report.tracks
    assert track_note(report.tracks, "kernelbench", "triton") is None


def test_kernelbench_before_prompts_toml_and_before_triton(tmp_path: Path) -> None:
    (examples,) = load_suite(kernelbench(tmp_path / "old", "examples")).tracks
    assert (examples.language, examples.backend, examples.example) == ("triton", "triton",
                                                                       "src/prompts/model_new_ex_add_triton.py")
    older = load_suite(kernelbench(tmp_path / "older", "none"))
    assert older.tracks == [] and [t.id for t in older.tasks] == ["level1/19_ReLU"]  # the tasks load all the same
    note = track_note(older.tracks, "kernelbench", "triton")
    assert note is not None and "declares no triton track" in note


def test_multikernelbench_declares_triton_for_gpus_and_triton_ascend_for_npus(tmp_path: Path) -> None:
    report = load_suite(multikernelbench(tmp_path / "MKB"))
    assert report.tasks[0].origin.format == "multikernelbench"
    tracks = {t.language: t for t in track_for(report.tracks, "triton")}
    assert set(tracks) == {"triton", "triton_ascend"}
    assert tracks["triton"].prompts == ("add_shot",) and tracks["triton"].example == "prompts/triton_new_model_add.py"
    assert tracks["triton_ascend"].prompts == () and tracks["triton_ascend"].evaluated  # evaluated, no prompt of its own
    assert [t.language for t in report.tracks if t.backend is None] == ["cuda"]
    without = load_suite(multikernelbench(tmp_path / "cuda-only", triton=False))
    assert track_for(without.tracks, "triton") == []


def test_our_suites_and_npukernelbench_have_no_tracks() -> None:
    assert load_suite("builtin").tracks == []
    assert track_note([], "suite", "triton") is None and track_note([], "kernelbench", "cpu") is None


def test_toml_tables_skip_multi_line_strings_and_bad_files() -> None:
    backends = toml_tables(PROMPTS_TOML)["backends"]
    assert sorted(backends) == ["cuda", "triton"]  # the template's look-alike table is text, not a table
    assert backends["triton"]["one_shot_new_arch"].endswith("_triton.py")
    assert toml_tables("[backends.triton\none = ") == {}


def test_tasks_list_reports_the_tracks(tmp_path: Path) -> None:
    completed = subprocess.run([str(KERNELSAGE), "tasks", "list", "--suite", str(kernelbench(tmp_path / "KB")),
                                "--json"], capture_output=True, text=True, timeout=300, check=False)
    assert completed.returncode == 0, completed.stderr
    tracks = json.loads(completed.stdout)["tracks"]
    assert [(t["language"], t["backend"]) for t in tracks] == [("cuda", None), ("triton", "triton")]


def test_check_runs_a_triton_kernel_on_a_kernelbench_task(tmp_path: Path) -> None:
    pytest.importorskip("triton", reason="the triton extra is not installed (pip install -e '.[triton]')")
    source = Path(__file__).resolve().parents[1] / "tools" / "triton" / "kernels" / "relu.py"
    completed = subprocess.run(
        [str(KERNELSAGE), "check", "--backend", "triton", "--device", "interpret", "--suite",
         str(kernelbench(tmp_path / "KB")), "--task", "level1/19_ReLU", "--source", str(source), "--json"],
        capture_output=True, text=True, timeout=600, check=False)
    report = json.loads(completed.stdout)
    assert (completed.returncode, report["correct"], report["latency"]) == (0, True, None), completed.stderr
    assert [t["language"] for t in report["suite_tracks"]] == ["triton"]


def test_multikernelbench_s_ascend_c_tracks_name_the_ascend_backend() -> None:
    root = Path(__file__).resolve().parent.parent / "fixtures" / "multikernelbench_groups"
    tracks = {track.language: track for track in suite_tracks(root / "reference", "multikernelbench")}
    assert (tracks["ascendc"].backend, tracks["ascendc"].declared_in) == ("ascend", "backends/ascendc_backend.py")
    direct = tracks["ascendc_direct_launch"]
    assert direct.backend == "ascend" and direct.prompts == ("add_shot",) and not direct.evaluated
    assert [t.language for t in track_for(list(tracks.values()), "ascend")] == ["ascendc", "ascendc_direct_launch"]
    assert track_note(list(tracks.values()), "multikernelbench", "ascend") is None
    kernelbench_note = track_note([tracks["triton_ascend"]], "kernelbench", "ascend")
    assert kernelbench_note is not None and "declares no ascend track" in kernelbench_note
