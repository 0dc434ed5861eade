"""The build: isolated compiler, the link check against the allowlist, the verified build cache."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from kernelsage.tools.cpu.compiler_view import C_LIBRARY_HEADERS
from kernelsage.tools.cpu.symbols import forbidden_links, is_allowed, needed_libraries, undefined_symbols
from kernelsage.tools.results import Candidate, Status
from kernelsage.tools.safeguards import scan_candidate

KERNELS = Path(__file__).resolve().parent / "kernels"
EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "kernelsage" / "tools" / "cpu" / "examples"


def host_lines() -> list[str]:
    lines = [line for line in Path("/etc/passwd").read_text().splitlines() if line.strip()]
    return lines[:3]


def test_including_a_host_file_finds_nothing_and_leaks_nothing(build):
    result = build("relu32", "include_passwd.cpp")
    assert result.status is Status.COMPILE_ERROR
    assert "/etc/passwd: No such file or directory" in result.log
    text = result.model_dump_json()
    assert not any(line in text for line in host_lines())


def test_a_library_that_links_a_forbidden_symbol_is_refused_with_its_name(build):
    result = build("relu32", "hidden_fopen.cpp")  # the source scan cannot see `fopen`
    assert result.status is Status.FORBIDDEN and result.artifact is None
    assert "fopen" in result.reason and "reaches files" in result.reason
    assert any("fopen" in error.message for error in result.errors)


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.cpp")), ids=lambda p: p.name)
def test_reference_kernels_link_only_allowed_symbols(build, path):
    result = build(path.stem, path)
    assert result.ok, result.log
    assert b"libgomp.so.1" in Path(result.artifact.path).read_bytes()  # OpenMP linked in the narrowed sandbox


KERNEL_TAIL = "\nint ks_kernel(const ks_tensor*, int, ks_tensor*, int, const ks_attr*, int) { return 0; }\n"


def host_sees(include: str) -> bool:
    """Whether the host's own compiler (no sandbox) finds this #include."""
    done = subprocess.run(["g++", "-E", "-x", "c++", "-"], input=f"#include {include}\n", capture_output=True,
                          text=True, check=False)
    return done.returncode == 0


def other_libraries_headers(limit: int = 8) -> list[str]:
    """Headers under /usr/include (or its multiarch directory) that belong to no part of the C/C++ toolchain
    (Python's, zlib's, OpenSSL's... whatever this host has), as `<relative/path.h>`; the source scan must not
    already refuse them, so that only the sandbox stands between the kernel and the header."""
    found = []
    for base in [Path("/usr/include"), *Path("/usr/include").glob("*-linux-gnu")]:
        for entry in sorted(base.iterdir()) if base.is_dir() else []:
            if entry.name in C_LIBRARY_HEADERS or entry.name == "c++" or entry.name.endswith("-linux-gnu"):
                continue
            header = entry if entry.is_file() else next(iter(sorted(entry.rglob("*.h"))), None)
            if header is not None and header.suffix == ".h" and os.access(header, os.R_OK):
                include = f"<{header.relative_to(base)}>"
                if not scan_candidate({"kernel.cpp": f"#include {include}\n"}) and host_sees(include):
                    found.append(include)
    return found[:limit]


def test_headers_of_other_libraries_under_usr_include_are_not_visible(cpu_backend):
    """Python's, OpenSSL's... headers (and Eigen's, where installed) are on the host's include path but not in
    the compiler's sandbox: a header-only library there would be usable with no symbol for the link check."""
    headers = other_libraries_headers()
    if not headers:
        pytest.skip("this host has no header under /usr/include outside the C/C++ toolchain")
    probes = "".join(f"#if __has_include({h})\n#error KS_VISIBLE {h}\n#endif\n" for h in headers)
    result = cpu_backend.compile(Candidate(task_id="relu32", files={
        "kernel.cpp": f'#include "kernelsage_cpu.h"\n{probes}{KERNEL_TAIL}'}))
    assert result.ok, result.log  # no __has_include found any of them
    direct = cpu_backend.compile(Candidate(task_id="relu32", files={
        "kernel.cpp": f'#include "kernelsage_cpu.h"\n#include {headers[0]}\n{KERNEL_TAIL}'}))
    assert direct.status is Status.COMPILE_ERROR
    assert f"{headers[0][1:-1]}: No such file or directory" in direct.log


def a_file_under_usr_share() -> Path | None:
    for pattern in ("common-licenses/*", "base-files/*", "dict/*", "zoneinfo/UTC", "*/*"):
        for path in sorted(Path("/usr/share").glob(pattern)):
            if path.is_file() and not path.is_symlink() and os.access(path, os.R_OK) and path.stat().st_size > 0:
                return path
    return None


def test_incbin_of_a_file_under_usr_share_finds_nothing(cpu_backend):
    """The assembler runs in the compiler's sandbox too, and /usr/share is not in it."""
    target = a_file_under_usr_share()
    if target is None:
        pytest.skip("no readable file under /usr/share on this host")
    source = (f'#include "kernelsage_cpu.h"\n#define CAT(a, b) a##b\n'
              f'CAT(__as, m__)(".section .rodata\\n.globl ks_loot\\nks_loot:\\n.incbin \\"{target}\\"\\n'
              f'.previous\\n");{KERNEL_TAIL}')
    result = cpu_backend.compile(Candidate(task_id="relu32", files={"kernel.cpp": source}))
    assert result.status is Status.COMPILE_ERROR, result.log
    assert str(target) in result.log and "file not found" in result.log.lower()


def test_a_corrupted_cache_entry_is_rebuilt(build):
    first = build("l1_relu", EXAMPLES / "l1_relu.cpp")
    assert first.ok and first.artifact.sha256
    library = Path(first.artifact.path)
    library.chmod(0o644)
    library.write_bytes(b"\x7fELF forged library")
    again = build("l1_relu", EXAMPLES / "l1_relu.cpp")
    assert again.ok and not again.cached
    assert again.artifact.sha256 == first.artifact.sha256
    assert Path(again.artifact.path).read_bytes() != b"\x7fELF forged library"
    assert build("l1_relu", EXAMPLES / "l1_relu.cpp").cached


def test_a_changed_library_is_not_run(cpu_backend, build, relu32):
    compiled = build("relu32", "wrong_result.cpp")
    forged = compiled.artifact.model_copy(update={"sha256": "0" * 64})
    result = cpu_backend.verify(forged, relu32)
    assert result.status is Status.HARNESS_ERROR and "sha256" in result.message


NM = """\
                 U GOMP_parallel@GOMP_4.0
                 w _ITM_deregisterTMCloneTable
                 U expf@GLIBC_2.27
                 U fopen64@GLIBC_2.2.5
                 U _ZNSt6thread15_M_start_threadESt10unique_ptrINS_6_StateESt14default_deleteIS1_EEPFvvE@GLIBCXX_3.4.22
                 U cblas_sgemm
"""
READELF = """\
 0x0000000000000001 (NEEDED)             Shared library: [libgomp.so.1]
 0x0000000000000001 (NEEDED)             Shared library: [libopenblas.so.0]
"""


def test_the_allowlist_names_each_forbidden_symbol_by_class():
    problems = dict(forbidden_links(undefined_symbols(NM), needed_libraries(READELF)))
    assert set(problems) == {"fopen64", "cblas_sgemm", "library libopenblas.so.0",
                             "_ZNSt6thread15_M_start_threadESt10unique_ptrINS_6_StateESt14default_deleteIS1_EEPFvvE"}
    assert "files" in problems["fopen64"] and "library" in problems["cblas_sgemm"]
    assert "threads" in problems["_ZNSt6thread15_M_start_threadESt10unique_ptrINS_6_StateESt14default_deleteIS1_EEPFvvE"]


@pytest.mark.parametrize("symbol", ["dlopen", "system", "execve", "fork", "socket", "syscall", "ptrace", "kill",
                                    "pthread_create", "mmap", "mprotect", "setns", "unshare", "open", "getenv",
                                    "sgemm_", "_ZN2at4_ops4relu4callERKNS_6TensorE"])
def test_escape_hatches_are_not_on_the_allowlist(symbol):
    assert not is_allowed(symbol)


@pytest.mark.parametrize("symbol", ["sqrtf", "memcpy", "GOMP_barrier", "omp_get_thread_num", "_Znwm", "_ZdlPvm",
                                    "__cxa_atexit", "__gxx_personality_v0", "_Unwind_Resume", "__stack_chk_fail",
                                    "_ZSt20__throw_length_errorPKc", "abort", "printf", "_ZGVdN8v_expf"])
def test_the_runtime_basics_are_allowed(symbol):
    assert is_allowed(symbol)
