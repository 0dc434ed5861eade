"""A Python installation under a home others cannot enter (pyenv or conda under /root, mode 0700), shown to the
sandboxed device run as a mirror of hard links: its readable files, and nothing else of the home."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from kernelsage.errors import BackendError
from kernelsage.tools.ascend.python_mirror import PythonMirror, skipped_site_dir
from kernelsage.tools.isolation import detect, popen_options, reachable_by_others, sandboxed


def traversable(path: Path) -> Path:
    """`path`, made here, and the directories above it up to the temporary directory, open to the sandbox."""
    path.mkdir(parents=True)
    path.chmod(0o755)
    for parent in path.parents:
        if parent == Path(tempfile.gettempdir()) or parent == Path("/"):
            break
        parent.chmod(parent.stat().st_mode | 0o111)
    return path


def closed_home(root: Path) -> tuple[Path, Path]:
    """home/ (0700) holding a Python prefix (its files as an installer leaves them) beside private things."""
    home = root / "home"
    prefix = home / ".pyenv" / "versions" / "3.11.7"
    stdlib = prefix / "lib" / "python3.11"
    for directory in (prefix / "bin", stdlib / "site-packages", prefix / "closed", home / ".ssh",
                      home / ".pyenv" / "versions" / "3.10.0"):
        directory.mkdir(parents=True)
    files = {prefix / "bin" / "python3.11": "#!python\n", stdlib / "os.py": "OS = 1\n",
             stdlib / "site-packages" / "boto.py": "BOTO = 1\n", prefix / "closed" / "inside.txt": "inside\n",
             prefix / "private.txt": "private\n", home / ".ssh" / "id_ed25519": "KEY\n",
             home / ".pyenv" / "versions" / "3.10.0" / "other.py": "OTHER\n", home / "notes.txt": "NOTES\n"}
    for path, text in files.items():
        path.write_text(text)
        path.chmod(0o644)
    (prefix / "bin" / "python3").symlink_to("python3.11")
    (prefix / "private.txt").chmod(0o600)
    (prefix / "closed").chmod(0o700)
    for directory in (root, home, *home.rglob("*")):
        if directory.is_dir() and not directory.is_symlink() and directory not in (home, prefix / "closed"):
            directory.chmod(0o755)
    home.chmod(0o700)
    return home, prefix


def test_site_packages_is_left_out_unless_the_interpreter_imports_from_it():
    stdlib = "/p/lib/python3.11"
    assert skipped_site_dir(f"{stdlib}/site-packages", [stdlib, "/venv/lib/python3.11/site-packages"])
    assert not skipped_site_dir(f"{stdlib}/site-packages", [stdlib, f"{stdlib}/site-packages"])
    assert not skipped_site_dir(f"{stdlib}/encodings", [stdlib])


def test_a_python_under_a_closed_home_is_shown_and_nothing_beside_it(tmp_path):
    isolation = detect()
    if not isolation.available:
        pytest.skip(f"needs bubblewrap: {isolation.problem}")
    home, prefix = closed_home(traversable(tmp_path / "host"))
    if isolation.user is not None:
        assert not reachable_by_others(str(prefix))  # the situation the mirror exists for
    mirror = PythonMirror(places=[str(traversable(tmp_path / "place"))])
    try:
        binds = mirror.binds([str(prefix)], [str(prefix / "lib" / "python3.11")], isolation.user)
        (source, target), = binds
        assert target == str(prefix)
        assert os.stat(Path(source) / "lib/python3.11/os.py").st_ino == os.stat(prefix / "lib/python3.11/os.py").st_ino
        top = Path(source).parent.stat()
        assert top.st_mode & 0o777 == 0o710 and (isolation.user is None or top.st_gid == isolation.user)
        script = (f"cat {prefix}/lib/python3.11/os.py; readlink {prefix}/bin/python3; echo ---; "
                  f"ls -a {home} {home}/.pyenv/versions {prefix} {prefix}/lib/python3.11; echo ---; "
                  f"cat {home}/.ssh/id_ed25519 {home}/notes.txt {prefix}/private.txt {prefix}/closed/inside.txt")
        command = sandboxed(isolation, ["/bin/sh", "-c", script], env={"PATH": "/usr/bin:/bin"}, ro_binds=binds)
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False,
                              **popen_options(isolation))
        shown, listing, secrets = done.stdout.split("---")
        assert shown.split() == ["OS", "=", "1", "python3.11"], done.stderr
        names = set(listing.split())
        assert {"bin", "lib", "os.py"} <= names
        assert not names & {".ssh", "notes.txt", "3.10.0", "site-packages", "private.txt", "closed"}, listing
        assert secrets.strip() == "" and "No such file" in done.stderr
    finally:
        mirror.close()
    assert not Path(source).exists()


def test_no_mirror_where_no_place_shares_the_installations_file_system(tmp_path):
    _, prefix = closed_home(tmp_path)
    with pytest.raises(BackendError, match=r"cannot read the Python environment .* use a Python installed where"):
        PythonMirror(places=[]).binds([str(prefix)], [], 65534)
