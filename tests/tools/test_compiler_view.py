"""The compiler's view of the system (`tools/cpu/compiler_view.py`, `header_tree.py`): what it reads from the
compiler's answers, which include entries it shows, the header tree, and that real kernels still build in it."""

from __future__ import annotations

import os
from pathlib import Path

from kernelsage.tools.cpu.compiler_view import (
    allowed_entries,
    header_entries,
    language_names,
    option_flags,
    path_mounts,
    script_paths,
    search_dirs,
    search_list,
    shared_libraries,
)
from kernelsage.tools.cpu.header_tree import build_header_tree
from kernelsage.tools.results import Candidate

VERBOSE = """\
ignoring nonexistent directory "/usr/local/include/x86_64-linux-gnu"
#include "..." search starts here:
#include <...> search starts here:
 /usr/include/c++/12
 /usr/include/x86_64-linux-gnu/c++/12
 /usr/include/c++/12/backward
 /usr/lib/gcc/x86_64-linux-gnu/12/include
 .
 /usr/include
End of search list.
"""
LDD = """\
\tlinux-vdso.so.1 (0x00007ffd)
\tlibisl.so.23 => /lib/x86_64-linux-gnu/libisl.so.23 (0x00007f1)
\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f2)
\t/lib64/ld-linux-x86-64.so.2 (0x00007f3)
"""
LIBC_SCRIPT = """/* GNU ld script
   Use the shared library, but some functions are only in
   the static library, so try that secondarily.  */
OUTPUT_FORMAT(elf64-x86-64)
GROUP ( /lib/x86_64-linux-gnu/libc.so.6 /usr/lib/x86_64-linux-gnu/libc_nonshared.a  AS_NEEDED ( /lib64/ld-linux-x86-64.so.2 ) )
"""


def test_the_compilers_answers_are_read():
    assert search_list(VERBOSE) == ["/usr/include/c++/12", "/usr/include/x86_64-linux-gnu/c++/12",
                                    "/usr/include/c++/12/backward", "/usr/lib/gcc/x86_64-linux-gnu/12/include",
                                    "/usr/include"]
    dirs = search_dirs("install: /usr/lib/gcc/x86_64-linux-gnu/12/\nprograms: =/a/b/:/c/../d/\nlibraries: =/e/\n")
    assert dirs == {"install": ["/usr/lib/gcc/x86_64-linux-gnu/12"], "programs": ["/a/b", "/d"], "libraries": ["/e"]}
    assert shared_libraries(LDD) == ["/lib/x86_64-linux-gnu/libisl.so.23", "/lib/x86_64-linux-gnu/libc.so.6",
                                     "/lib64/ld-linux-x86-64.so.2"]
    assert script_paths(LIBC_SCRIPT) == ["/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc_nonshared.a",
                                         "/lib64/ld-linux-x86-64.so.2"]
    assert option_flags(["-O3", "-fopenmp", "-I.", "-o", "kernel.so", "kernel.cpp"]) == ("-O3", "-fopenmp")
    assert language_names({"LANG": "de_DE.UTF-8"}) == ["de_DE", "de"]
    assert language_names({"LANG": "C.UTF-8"}) == [] and language_names({"LC_ALL": "fr", "LANG": "de_DE"}) == ["fr"]


def make_include_dirs(root: Path) -> dict[str, Path]:
    """A host's include directories in miniature: glibc's entries among other libraries' in the shared ones."""
    include, multi, cxx, gcc = root / "include", root / "include" / "multi", root / "include" / "c++" / "12", \
        root / "gcc" / "12"
    for directory in (include / "sys", include / "eigen3" / "Eigen", include / "python3.11", multi / "bits",
                      multi / "openblas", cxx / "bits", gcc / "include"):
        directory.mkdir(parents=True)
    for file in (include / "stdio.h", include / "sys" / "types.h", include / "eigen3" / "Eigen" / "Core",
                 include / "python3.11" / "Python.h", include / "zlib.h", multi / "bits" / "types.h",
                 multi / "openblas" / "cblas.h", cxx / "vector", gcc / "include" / "omp.h"):
        file.write_text(f"// {file.name}\n")
    (include / "math.h").symlink_to("stdio.h")
    return {"include": include, "multi": multi, "cxx": cxx, "gcc": gcc}


def test_only_the_c_librarys_entries_of_a_shared_include_directory_are_shown(tmp_path):
    dirs = {k: str(v) for k, v in make_include_dirs(tmp_path).items()}
    whole, entries = header_entries([dirs["cxx"], f"{dirs['gcc']}/include", dirs["multi"], dirs["include"]],
                                    [f"{dirs['gcc']}/include", dirs["multi"], dirs["include"]], [dirs["gcc"]])
    assert sorted(whole) == sorted([dirs["cxx"], dirs["gcc"]])  # the C++ library's and the compiler's own
    assert sorted(entries) == sorted([f"{dirs['multi']}/bits", f"{dirs['include']}/math.h",
                                      f"{dirs['include']}/stdio.h", f"{dirs['include']}/sys"])
    assert allowed_entries("/usr/local/include", ["stdio.h", "sys"]) == []  # local installs: nothing


def test_the_header_tree_holds_only_the_allowed_entries(tmp_path):
    dirs = make_include_dirs(tmp_path / "host")
    entries = [str(dirs["include"] / n) for n in ("stdio.h", "math.h", "sys")] + [str(dirs["multi"] / "bits")]
    home = tmp_path / "home"
    home.mkdir()
    mounts = build_header_tree(entries, [str(dirs["cxx"])], home)
    (tree,) = home.iterdir()
    assert mounts == [("ro-bind", str(tree), str(dirs["include"]))]  # one mount for both directories
    listed = sorted(str(p.relative_to(tree)) for p in tree.rglob("*"))
    assert listed == ["c++", "c++/12", "math.h", "multi", "multi/bits", "multi/bits/types.h", "stdio.h", "sys",
                      "sys/types.h"]
    assert os.readlink(tree / "math.h") == "stdio.h"  # links stay links
    assert (tree / "stdio.h").read_text() == "// stdio.h\n" and not any((tree / "c++" / "12").iterdir())
    assert all(p.stat().st_mode & 0o005 == 0o005 for p in [tree, *tree.rglob("*")] if p.is_dir())  # for uid 65534
    assert build_header_tree(entries, [], home) != mounts  # a second view beside the first


def test_a_programs_links_are_kept_on_the_way_to_it(tmp_path):
    (tmp_path / "x86_64-linux-gnu-ld.bfd").write_text("ld")
    (tmp_path / "x86_64-linux-gnu-ld").symlink_to("x86_64-linux-gnu-ld.bfd")
    (tmp_path / "ld").symlink_to("x86_64-linux-gnu-ld")
    real = os.path.realpath(tmp_path)
    assert path_mounts(str(tmp_path / "ld")) == [
        ("symlink", "x86_64-linux-gnu-ld", f"{real}/ld"),
        ("symlink", "x86_64-linux-gnu-ld.bfd", f"{real}/x86_64-linux-gnu-ld"),
        ("ro-bind", f"{real}/x86_64-linux-gnu-ld.bfd", f"{real}/x86_64-linux-gnu-ld.bfd")]


HEADER_LINES = (
    "algorithm any array atomic bitset cassert cctype cerrno cfenv cfloat charconv chrono cinttypes climits ",
    "clocale cmath codecvt complex condition_variable csetjmp csignal cstdarg cstddef cstdint cstdio cstdlib ",
    "cstring ctime cuchar cwchar cwctype deque exception execution filesystem forward_list fstream functional ",
    "future initializer_list iomanip ios iosfwd iostream istream iterator limits list locale map memory ",
    "memory_resource mutex new numeric optional ostream queue random ratio regex scoped_allocator set ",
    "shared_mutex sstream stack stdexcept streambuf string string_view system_error thread tuple type_traits ",
    "typeindex typeinfo unordered_map unordered_set utility valarray variant vector ",
    "assert.h complex.h ctype.h errno.h fenv.h float.h inttypes.h limits.h locale.h math.h setjmp.h signal.h ",
    "stdarg.h stddef.h stdint.h stdio.h stdlib.h string.h time.h uchar.h wchar.h wctype.h ",
    "omp.h immintrin.h x86intrin.h alloca.h malloc.h unistd.h pthread.h sched.h fcntl.h dirent.h link.h ",
    "sys/stat.h sys/time.h linux/filter.h linux/seccomp.h",
)
STANDARD_HEADERS = [name for line in HEADER_LINES for name in line.split()]


def test_every_standard_header_still_compiles_in_the_compilers_sandbox(cpu_backend):
    """The C and C++ standard libraries, OpenMP, the intrinsics and the glibc/kernel headers kernels (and the
    attack tests) use are all in the narrowed sandbox."""
    includes = "".join(f"#include <{name}>\n" for name in STANDARD_HEADERS)
    source = (f'#include "kernelsage_cpu.h"\n{includes}'
              "int ks_kernel(const ks_tensor*, int, ks_tensor*, int, const ks_attr*, int) {\n"
              "    std::vector<float> v(4, 1.f);\n    return (int)std::accumulate(v.begin(), v.end(), 0.f) - 4;\n}\n")
    result = cpu_backend.compile(Candidate(task_id="relu32", files={"kernel.cpp": source}))
    assert result.ok, result.log
