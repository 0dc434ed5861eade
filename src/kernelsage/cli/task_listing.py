"""What `kernelsage tasks list` shows of a suite, as JSON-ready data; the built-in suite's is kept in the cache
under the content of the tasks package, so that listing it again loads neither torch nor the task files
until one of them changes (loading them takes a second or more; reading the cache, milliseconds)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from kernelsage import __version__
from kernelsage.files import write_atomically

TASKS_PACKAGE = Path(__file__).resolve().parents[1] / "tasks"  # the loaders and the built-in suite
TOLERANCE_ENV = "KERNELSAGE_TOLERANCE"  # a stricter tolerance is checked against every task when it loads


def suite_listing(report: Any) -> dict[str, Any]:
    """A load report as `tasks list --json` prints it: every task's summary, the files that failed to load,
    the suite's kernel-language tracks."""
    return {"tasks": [task.summary() for task in report.tasks],
            "problems": [{"path": p.path, "message": p.message} for p in report.problems],
            "tracks": [track.to_dict() for track in report.tracks]}


def builtin_listing(format: str, shape_budget: str | None) -> dict[str, Any]:
    """The built-in suite's listing: from the cache when the tasks package is as it was, else loaded (and
    kept for the next time)."""
    entry = cache_dir() / f"builtin-{listing_key(format, shape_budget)}.json"
    try:
        return json.loads(entry.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    from kernelsage.tasks.loaders import load_suite

    listing = suite_listing(load_suite("builtin", format, shape_budget=shape_budget))
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(entry, json.dumps(listing))
    except OSError:  # an unwritable cache costs the next listing a load, nothing else
        pass
    return listing


def listing_key(format: str, shape_budget: str | None) -> str:
    """Everything the built-in listing depends on: the content of every file of the tasks package (loaders,
    model, suite), where it is (summaries name the files), the version, the format, shape budget and tolerance."""
    digest = hashlib.sha256(json.dumps([__version__, str(TASKS_PACKAGE), format, shape_budget,
                                        os.environ.get(TOLERANCE_ENV)]).encode())
    for path in sorted(TASKS_PACKAGE.rglob("*.py")):
        digest.update(str(path.relative_to(TASKS_PACKAGE)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:32]


def cache_dir() -> Path:
    """Beside the build cache: under $KERNELSAGE_CACHE, else the per-user cache directory."""
    configured = os.environ.get("KERNELSAGE_CACHE")
    if configured:
        return Path(configured).expanduser() / "task-listings"
    import platformdirs

    return Path(platformdirs.user_cache_dir("kernelsage")) / "task-listings"
