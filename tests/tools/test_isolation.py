"""Isolation with bubblewrap: the probe, what a sandboxed program sees, the refusal and the unsafe escape hatch."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from kernelsage.cli.doctor import check_isolation
from kernelsage.tools.cpu.backend import CpuBackend
from kernelsage.tools.isolated_backend import UnsafeIsolationWarning
from kernelsage.tools.isolation import (
    UNSAFE_ENV,
    Isolation,
    IsolationUnavailableError,
    Rlimits,
    detect,
    popen_options,
    require,
    sandboxed,
    unsafe_requested,
)
from kernelsage.tools.results import Candidate

EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "kernelsage" / "tools" / "cpu" / "examples"
NONE = Isolation("none", problem="no isolation, for this test")


@pytest.fixture(scope="module")
def isolation() -> Isolation:
    found = detect()
    assert found.available, f"bubblewrap must work on the test machines: {found.problem}"
    return found


def run_isolated(isolation: Isolation, script: str, **options: object) -> subprocess.CompletedProcess[str]:
    command = sandboxed(isolation, ["/bin/sh", "-c", script], env={"PATH": "/usr/bin:/bin"}, **options)
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False,
                          **popen_options(isolation))


def test_the_probe_finds_bubblewrap_and_doctor_reports_it(isolation):
    assert isolation.level == "bubblewrap" and isolation.version
    assert detect() is isolation  # probed once
    if os.geteuid() == 0:
        assert isolation.user == 65534  # as root, the sandbox is not root on the host either
    check = check_isolation()
    assert check.status == "ok" and "bubblewrap" in check.detail and "seccomp" in check.detail


def test_a_sandboxed_program_sees_nothing_of_the_host(isolation, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-sandboxes")
    done = run_isolated(isolation, "id -u; echo ---; ls /; echo ---; ls /proc | grep -c '^[0-9]'; "
                                   "cat /etc/passwd; env; touch /usr/x; echo end")
    out = done.stdout
    uid, top, processes = out.split("---")[:3]
    assert uid.strip() == "65534"
    assert set(top.split()) <= {"bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "proc", "dev", "tmp"}
    assert int(processes.split()[0]) <= 4  # bubblewrap's pid 1, the shell, ls and grep: nothing of the host
    assert "sk-not-for-sandboxes" not in out and "root:x:0:0" not in out
    assert "PATH=/usr/bin:/bin" in out and "end" in out
    assert "Read-only file system" in done.stderr


def test_limits_are_set_inside_the_sandbox(isolation):
    done = run_isolated(isolation, "ulimit -v; ulimit -t; ulimit -c",
                        limits=Rlimits(address_space=1 << 30, cpu_s=7, file_bytes=1 << 20, processes=64))
    assert done.stdout.split() == [str((1 << 30) // 1024), "7", "0"], done.stderr


def test_no_network_in_the_sandbox(isolation):
    done = run_isolated(isolation, "cat /proc/net/dev | tail -n +3 | cut -d: -f1")
    assert [line.strip() for line in done.stdout.splitlines()] == ["lo"]


def test_without_isolation_candidates_are_refused_unless_the_unsafe_flag_is_given(monkeypatch, tmp_path):
    monkeypatch.delenv(UNSAFE_ENV, raising=False)
    assert not unsafe_requested()
    refused = CpuBackend(cache_dir=tmp_path / "refused", isolation=NONE)
    try:
        with pytest.raises(IsolationUnavailableError, match="bubblewrap") as info:
            refused.compile(Candidate(task_id="relu32", files={"kernel.cpp": "int x;"}))
        assert "--unsafe-no-isolation" in str(info.value) and UNSAFE_ENV in str(info.value)
    finally:
        refused.close()
    monkeypatch.setenv(UNSAFE_ENV, "1")
    assert unsafe_requested()
    assert require(unsafe=True) is not None


def test_the_unsafe_flag_runs_candidates_unisolated_with_a_warning(tmp_path, relu32):
    with CpuBackend(cache_dir=tmp_path / "unsafe", isolation=NONE, unsafe_no_isolation=True, reps=5,
                    warmup=1) as backend:
        with pytest.warns(UnsafeIsolationWarning, match="WITHOUT ISOLATION"):
            compiled = backend.compile(Candidate(task_id="relu32", files={
                "kernel.cpp": (EXAMPLES / "l1_relu.cpp").read_text()}))
        assert compiled.ok, compiled.log
        verified = backend.verify(compiled.artifact, relu32)
        assert verified.correct, verified.message
        profiled = backend.profile(compiled.artifact, relu32)
        assert profiled.ok and profiled.output_correct, profiled.message


def test_a_runtime_only_sandbox_holds_only_the_files_it_names(isolation):
    """The runner's sandbox: its loader and the runtime libraries (here plus a shell to look around), no
    other file of /usr, so a kernel's constructor finds no library outside the runtime to load."""
    from kernelsage.tools.cpu.binaries import interpreter, runtime_files

    shell = os.path.realpath("/bin/sh")
    files = [*runtime_files(interpreter(Path(shell).read_bytes())), shell]
    script = "for f in /usr/*/* /usr/lib/*/* /etc/*; do echo \"$f\"; done"
    command = sandboxed(isolation, [shell, "-c", script], env={}, system_files=files)
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False,
                          **popen_options(isolation))
    assert done.returncode == 0, done.stderr
    seen = {line for line in done.stdout.split() if "*" not in line}
    names = {Path(f).name for f in files}
    assert seen and all(Path(line).name in names or Path(line).is_dir() for line in seen), sorted(seen)
    assert not any("libz" in line or "python" in line or line.startswith("/etc/") for line in seen), sorted(seen)
    assert any(Path(line).name == "libgomp.so.1" for line in seen), sorted(seen)


def reachable(path: Path) -> Path:
    """`path`, made here and traversable by the sandbox's own user (as the backend arranges for its own)."""
    path.mkdir()
    path.chmod(0o755)
    for parent in path.parents:
        if parent == Path(tempfile.gettempdir()) or parent == Path("/"):
            break
        parent.chmod(parent.stat().st_mode | 0o111)
    return path


def test_the_compilers_sandbox_holds_the_toolchain_and_nothing_else_of_usr(isolation, tmp_path):
    """The build's view: the compiler, its programs and libraries, the C and C++ standard library headers,
    and no other library's headers, no /usr/share, no /etc (here plus a shell to look around)."""
    from kernelsage.tools.cpu.binaries import interpreter
    from kernelsage.tools.cpu.build import DEFAULT_FLAGS, compile_command
    from kernelsage.tools.cpu.compiler_view import C_LIBRARY_HEADERS, compiler_view, option_flags, path_mounts

    home = reachable(tmp_path / "view")
    view = compiler_view("g++", option_flags(compile_command("g++", DEFAULT_FLAGS, "k.cpp")[1:]), (), str(home))
    shell = os.path.realpath("/bin/sh")
    extra = [*path_mounts(shell), *path_mounts(interpreter(Path(shell).read_bytes()))]
    script = ("g++ --version; echo ---; for f in /usr/* /usr/include/* /usr/include/*/* /usr/lib/* "
              "/usr/share/* /etc/* /usr/local/*; do echo \"$f\"; done")
    command = sandboxed(isolation, [shell, "-c", script], env={"PATH": "/usr/bin:/bin"},
                        system_mounts=[*view, *extra])
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False,
                          **popen_options(isolation))
    assert done.returncode == 0, done.stderr
    version, listing = done.stdout.split("---")
    assert "g++" in version
    seen = {line for line in listing.split() if "*" not in line}
    assert {"/usr/bin", "/usr/include", "/usr/lib"} <= seen and not any(
        line.startswith(("/usr/share/", "/etc/", "/usr/local/")) for line in seen), sorted(seen)
    include = {line.split("/")[3] for line in seen if line.startswith("/usr/include/")}
    assert include - C_LIBRARY_HEADERS <= {"c++", "x86_64-linux-gnu", "aarch64-linux-gnu"}, sorted(include)
    multiarch = {line.split("/")[4] for line in seen if line.count("/") == 4 and "-linux-gnu/" in line}
    assert multiarch - C_LIBRARY_HEADERS <= {"c++"}, sorted(multiarch)  # no python3.x, openssl, openblas...
    assert {"stdio.h", "linux", "c++"} <= include and "sys" in include | multiarch
    assert {line for line in seen if line.startswith("/usr/lib/")} <= {
        "/usr/lib/gcc", "/usr/lib/locale", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
        "/usr/lib64"}, sorted(seen)
    assert not any("python" in line or "eigen" in line for line in seen)
