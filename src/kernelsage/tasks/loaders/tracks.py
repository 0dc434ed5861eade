"""The kernel-language tracks a suite's checkout offers (its Triton track among them), read from its own files.

Neither KernelBench nor MultiKernelBench keeps separate task files per language: a track is the same task files
(`KernelBench/levelN/*.py`, `reference/<category>/*.py`) with a language chosen when prompting and evaluating.
What declares a track, in each repository's layout:

- KernelBench: a `[backends.<language>]` table of `src/kernelbench/prompts/prompts.toml` (`src/prompts/` before
  the package move), whose `one_shot_new_arch` names the track's one-shot example; before that file existed,
  only the example `src/prompts/model_new_ex_add_<language>.py`.
- MultiKernelBench: `@register_backend("<language>")` in `backends/*.py` (the evaluation) and
  `@register_prompt("<language>", "<strategy>")` in `prompt_generators/*.py` (the prompting, whose add_shot
  example is `prompts/<language>_new_model_add.py`, or for the directly launched Ascend C kernels
  `prompts/<language>_model_add.json`).

The files are read (the TOML with tomllib, Python through `ast` without running anything), never copied: a
track records the paths, relative to the repository's root, and which kernelsage backend writes the language.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # the same parser, published for 3.10
    import tomli as tomllib

# The suites' language names that a kernelsage backend writes (anything else is listed with backend None):
# MultiKernelBench's Ascend C tracks, an msopgen custom-operator project (`ascendc`) and a kernel launched
# directly (`ascendc_direct_launch`), are what kernelsage's ascend backend writes.
BACKEND_OF = {"triton": "triton", "triton_ascend": "triton", "ascendc": "ascend", "ascendc_direct_launch": "ascend"}
TASK_FOLDER = {"kernelbench": "KernelBench", "multikernelbench": "reference"}
KERNELBENCH_TOML = ("src/kernelbench/prompts/prompts.toml", "src/prompts/prompts.toml")
KERNELBENCH_EXAMPLES = ("src/kernelbench/prompts", "src/prompts")


@dataclass(frozen=True, kw_only=True)
class Track:
    """One kernel language a suite's checkout offers for all of its tasks."""

    language: str  # the suite's own name for it: "triton", "triton_ascend", "cuda", ...
    backend: str | None  # the kernelsage backend that writes it, or None
    declared_in: str  # the file that declares it, relative to the repository's root
    example: str | None = None  # the track's one-shot example kernel, relative to the root, where there is one
    prompts: tuple[str, ...] = ()  # MultiKernelBench: its prompt strategies for the language
    evaluated: bool = True  # MultiKernelBench: a backend of its evaluation runs the language

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "prompts": list(self.prompts)}


def repository_root(path: Path, format: str) -> Path | None:
    """The root of the suite's repository around `path` (the folder above its task folder), or None."""
    folder = TASK_FOLDER.get(format)
    if folder is None:
        return None
    path = path.resolve()
    for candidate in (path, *path.parents):  # --suite at the task folder or below it
        if candidate.name == folder:
            return candidate.parent
    return path if (path / folder).is_dir() else None  # --suite at the repository's root


def suite_tracks(path: Path, format: str) -> list[Track]:
    """The tracks the checkout around `path` declares, sorted by language; [] for a suite without tracks (our
    own, NPUKernelBench) or a checkout whose files declare none (KernelBench before its Triton backend)."""
    root = repository_root(path, format)
    if root is None:
        return []
    tracks = _kernelbench_tracks(root) if format == "kernelbench" else _multikernelbench_tracks(root)
    return sorted(tracks, key=lambda track: track.language)


def track_for(tracks: list[Track], backend: str) -> list[Track]:
    """The suite's tracks that a kernelsage backend writes (for triton: "triton", and "triton_ascend")."""
    return [track for track in tracks if track.backend == backend]


def track_note(tracks: list[Track], format: str, backend: str) -> str | None:
    """A line for a run of `backend` on a KernelBench or MultiKernelBench checkout that declares no track for
    it (kernelsage runs the tasks all the same, with its own contract); None when it declares one or the suite
    has no tracks at all."""
    if backend not in set(BACKEND_OF.values()) or format not in TASK_FOLDER or track_for(tracks, backend):
        return None
    declared = ", ".join(track.language for track in tracks) or "none"
    return (f"this {format} checkout declares no {backend} track (its tracks: {declared}); kernelsage's {backend} "
            f"backend runs its tasks all the same, so results are not the suite's own {backend} track's")


def _string(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _existing(root: Path, relative: str | None) -> str | None:
    return relative if relative and (root / relative).is_file() else None


def _kernelbench_tracks(root: Path) -> list[Track]:
    for relative in KERNELBENCH_TOML:
        if (root / relative).is_file():
            backends = toml_tables((root / relative).read_text(encoding="utf-8", errors="replace")).get("backends")
            languages = {name: table for name, table in (backends or {}).items() if isinstance(table, dict)}
            return [Track(language=language, backend=BACKEND_OF.get(language), declared_in=relative,
                          example=_existing(root, _string(table.get("one_shot_new_arch"))))
                    for language, table in languages.items()]
    tracks = []  # before prompts.toml: one one-shot example per language beside CUDA's (model_new_ex_add.py)
    for folder in KERNELBENCH_EXAMPLES:
        for example in sorted((root / folder).glob("model_new_ex_add_*.py")):
            language = example.stem.removeprefix("model_new_ex_add_")
            relative = f"{folder}/{example.name}"
            tracks.append(Track(language=language, backend=BACKEND_OF.get(language), declared_in=relative,
                                example=relative))
        if tracks:
            break
    return tracks


def toml_tables(text: str) -> dict[str, Any]:
    """A TOML file's tables, or none where it does not parse (an upstream file is read, never trusted)."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {}


def _decorator_calls(path: Path, name: str) -> list[tuple[str, ...]]:
    """The string arguments of every `@name(...)` decorator in a Python file (read with ast, not run)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef | ast.FunctionDef):
            for decorator in node.decorator_list:
                if (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Name)
                        and decorator.func.id == name):
                    found.append(tuple(a.value for a in decorator.args
                                       if isinstance(a, ast.Constant) and isinstance(a.value, str)))
    return found


def _multikernelbench_tracks(root: Path) -> list[Track]:
    evaluated: dict[str, str] = {}
    for file in sorted((root / "backends").glob("*.py")):
        for args in _decorator_calls(file, "register_backend"):
            if args:
                evaluated.setdefault(args[0], f"backends/{file.name}")
    prompts: dict[str, list[str]] = {}
    prompt_files: dict[str, str] = {}
    for file in sorted((root / "prompt_generators").glob("*.py")):
        for args in _decorator_calls(file, "register_prompt"):
            if len(args) == 2:
                prompts.setdefault(args[0], []).append(args[1])
                prompt_files.setdefault(args[0], f"prompt_generators/{file.name}")
    return [Track(language=language, backend=BACKEND_OF.get(language),
                  declared_in=evaluated.get(language) or prompt_files[language],
                  example=_existing(root, f"prompts/{language}_new_model_add.py")
                  or _existing(root, f"prompts/{language}_model_add.json"),
                  prompts=tuple(sorted(prompts.get(language, []))), evaluated=language in evaluated)
            for language in set(evaluated) | set(prompts)]
