"""The compiler's view of the system: the files a sandboxed C++ build needs, and nothing else of /usr.

A candidate's source can read any file its compiler sees (`#include`, `.incbin`) and use any header-only
library it finds, with no undefined symbol for the link check to see. So the build's sandbox holds only:

- the compiler driver and its internal programs (cc1plus, collect2, lto-wrapper, lto1, as, ld, the LTO
  plugin; `-print-prog-name`, `-print-file-name`), each with the symbolic links that lead to it;
- the compiler's own directories, whole: its installation directory (`-print-search-dirs`: programs,
  intrinsics, omp.h, crt files, libgcc, the link-time libstdc++/libgomp) and the C++ standard library's
  header directories (the include directories the C++ compiler searches and the C compiler does not);
- of the include directories shared with every other package (/usr/include and its multiarch directory),
  only the C library's and the Linux UAPI headers it includes (`C_LIBRARY_HEADERS`): other entries there are
  other libraries (Eigen, Python, PostgreSQL, OpenBLAS...), and a library's headers would be usable with no
  undefined symbol, so they are left out. glibc's headers declare only glibc functions, whose use the link
  check judges by name (a kernel that includes <sys/socket.h> is refused naming `socket`). They are shown as
  one directory built by the trusted side (`header_tree`), where the sandbox's user can reach one;
- the files linking reads (libc, libm, libmvec, libstdc++, libgomp, libgcc_s and the glibc stubs, the linker
  scripts and what they name, the crt files), the dynamic loader, and every shared library the programs
  above need (`ldd`);
- the locale data and the toolchain's message catalogs for the build's language, so messages read as the
  user expects.

The view is computed once per compiler and flags on the trusted side (the worker, before it forks a build)
from the compiler's own answers, and handed to `isolation.sandboxed(system_mounts=...)`.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from kernelsage.errors import BackendError
from kernelsage.tools.cpu.binaries import RUNTIME_SONAMES
from kernelsage.tools.cpu.header_tree import build_header_tree
from kernelsage.tools.isolation import Mount

SANDBOX_PATH = "/usr/bin:/bin"  # the build's PATH: the driver is found where the sandbox will look for it
PROGRAMS = ("cc1plus", "collect2", "lto-wrapper", "lto1", "as", "ld")
PLUGINS = ("liblto_plugin.so",)
LINK_FILES = (
    *RUNTIME_SONAMES, "libc.so", "libc_nonshared.a", "libm.so", "libmvec.so", "libstdc++.so", "libgomp.so",
    "libgcc_s.so", "libgcc.a", "libgcc_eh.a", "libpthread.so", "libpthread.a", "libdl.so", "libdl.a", "librt.so",
    "librt.a", "crt1.o", "Scrt1.o", "crti.o", "crtn.o", "crtbeginS.o", "crtendS.o",
)
# glibc's public headers (Debian 12's libc6-dev, plus names older releases installed) and the kernel's UAPI
# directories they include. Only these entries of a shared include directory are shown to the compiler.
C_LIBRARY_HEADERS = frozenset({
    "_G_config.h", "a.out.h", "aio.h", "aliases.h", "alloca.h", "ar.h", "argp.h", "argz.h", "arpa", "assert.h",
    "bits", "byteswap.h", "complex.h", "cpio.h", "ctype.h", "dirent.h", "dlfcn.h", "elf.h", "endian.h", "envz.h",
    "err.h", "errno.h", "error.h", "execinfo.h", "fcntl.h", "features-time64.h", "features.h", "fenv.h",
    "finclude", "fmtmsg.h", "fnmatch.h", "fpu_control.h", "fstab.h", "fts.h", "ftw.h", "gconv.h", "getopt.h",
    "glob.h", "gnu", "gnu-versions.h", "grp.h", "gshadow.h", "iconv.h", "ieee754.h", "ifaddrs.h", "inttypes.h",
    "langinfo.h", "lastlog.h", "libgen.h", "libintl.h", "libio.h", "limits.h", "link.h", "locale.h", "malloc.h",
    "math.h", "mcheck.h", "memory.h", "mntent.h", "monetary.h", "mqueue.h", "net", "netash", "netatalk",
    "netax25", "netdb.h", "neteconet", "netinet", "netipx", "netiucv", "netpacket", "netrom", "netrose", "nfs",
    "nl_types.h", "nss.h", "obstack.h", "paths.h", "poll.h", "printf.h", "proc_service.h", "protocols",
    "pthread.h", "pty.h", "pwd.h", "re_comp.h", "regex.h", "regexp.h", "resolv.h", "rpc", "sched.h", "scsi",
    "search.h", "semaphore.h", "setjmp.h", "sgtty.h", "shadow.h", "signal.h", "spawn.h", "stab.h",
    "stdc-predef.h", "stdint.h", "stdio.h", "stdio_ext.h", "stdlib.h", "string.h", "strings.h", "stropts.h",
    "sys", "syscall.h", "sysexits.h", "syslog.h", "tar.h", "termio.h", "termios.h", "tgmath.h", "thread_db.h",
    "threads.h", "time.h", "ttyent.h", "uchar.h", "ucontext.h", "ulimit.h", "unistd.h", "ustat.h", "utime.h",
    "utmp.h", "utmpx.h", "values.h", "wait.h", "wchar.h", "wctype.h", "wordexp.h", "xlocale.h",
    "linux", "asm", "asm-generic",
})
LOCAL_PREFIX = "/usr/local/"  # local installs are never the C library's: nothing of them is shown
LOCALE_DATA = "/usr/lib/locale"
CATALOG_ROOT = "/usr/share/locale"
CATALOG_DOMAINS = re.compile(r"^(gcc|cpplib|binutils|bfd|gas|ld|gold|opcodes|libc)(-[\d.]+)?\.mo$")


def _ask(compiler: str, *args: str) -> str:
    completed = subprocess.run([compiler, *args], capture_output=True, text=True, check=False, timeout=60,
                               stdin=subprocess.DEVNULL)
    return completed.stdout.strip() if completed.returncode == 0 else ""


def search_dirs(output: str) -> dict[str, list[str]]:
    """`-print-search-dirs` as {"install": [dir], "programs": [dirs], "libraries": [dirs]} (normalised)."""
    found: dict[str, list[str]] = {}
    for line in output.splitlines():
        key, _, value = line.partition(": ")
        if key in ("install", "programs", "libraries"):
            found[key] = [os.path.normpath(p) for p in value.lstrip("=").split(":") if os.path.isabs(p)]
    return found


def find_in(directories: Sequence[str], name: str, *, executable: bool = False) -> str:
    """The first `directory/name` that exists (and is executable, if asked), as the driver looks for its
    programs (-print-prog-name) and files (-print-file-name); '' if none."""
    for directory in directories:
        path = os.path.join(directory, name)
        if os.path.isfile(path) and (not executable or os.access(path, os.X_OK)):
            return path
    return ""


def search_list(verbose_output: str) -> list[str]:
    """The `#include <...>` search directories of `cc -E -v` output, normalised, absolute ones only."""
    inside, found = False, []
    for line in verbose_output.splitlines():
        if line.startswith("#include <...> search starts here:"):
            inside = True
        elif line.startswith("End of search list."):
            break
        elif inside and line.startswith(" "):
            path = line.strip().split(" (")[0]  # macOS adds " (framework directory)"
            if os.path.isabs(path):
                found.append(os.path.normpath(path))
    return found


def include_dirs(compiler: str, language: str, flags: Sequence[str]) -> list[str]:
    completed = subprocess.run([compiler, *flags, "-x", language, "-E", "-v", "-"], capture_output=True,
                               text=True, check=False, timeout=60, input="")
    return search_list(completed.stderr)


def outermost(paths: Iterable[str]) -> list[str]:
    """The directories that are not inside another one of them (each realpath'd), in order of length."""
    kept: list[str] = []
    for path in sorted({os.path.realpath(p) for p in paths if p and os.path.isdir(p)}, key=len):
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return kept


def inside(path: str, directories: Sequence[str]) -> bool:
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in directories)


def allowed_entries(directory: str, names: Iterable[str]) -> list[str]:
    """The C library's entries of a shared include directory (none of a local one)."""
    if (directory.rstrip("/") + "/").startswith(LOCAL_PREFIX):
        return []
    return [os.path.join(directory, name) for name in sorted(names) if name in C_LIBRARY_HEADERS]


def shared_libraries(ldd_output: str) -> list[str]:
    """The files `ldd` resolved (libraries after '=>', the loader on a line of its own)."""
    found = []
    for line in ldd_output.splitlines():
        line = line.strip()
        target = line.split("=>", 1)[1].strip() if "=>" in line else line
        path = target.split(" (")[0].strip()
        if os.path.isabs(path):
            found.append(path)
    return found


def script_paths(text: str) -> list[str]:
    """The absolute paths a linker script names (libc.so: GROUP ( /lib/.../libc.so.6 ... ))."""
    body = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.findall(r"(?<![\w.])(/[^\s()]+)", body)


def linker_script(path: str) -> str:
    """The text of a linker script, '' for anything else (an ELF file or archive starts with binary magic)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(64 << 10)
    except OSError:
        return ""
    if head.startswith((b"\x7fELF", b"!<arch>")) or b"\0" in head:
        return ""
    return head.decode(errors="replace")


def path_mounts(path: str) -> list[Mount]:
    """`path` as the sandbox should show it: every symbolic link on the way (kept as links, so a program's
    name, its prefix and its relative lookups stay as on the host) and the file it leads to, read-only."""
    mounts: list[Mount] = []
    current = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
    while os.path.islink(current) and len(mounts) < 40:
        link = os.readlink(current)
        mounts.append(("symlink", link, current))
        following = os.path.join(os.path.dirname(current), link)
        current = os.path.join(os.path.realpath(os.path.dirname(following)), os.path.basename(following))
    if os.path.exists(current):
        mounts.append(("ro-bind", current, current))
    return mounts


def language_names(env: Mapping[str, str]) -> list[str]:
    """The message language of a locale ("de_DE.UTF-8" -> ["de_DE", "de"]); none for C/POSIX."""
    value = env.get("LC_ALL") or env.get("LC_MESSAGES") or env.get("LANG") or ""
    name = value.split(".")[0].split("@")[0]
    if not name or name in ("C", "POSIX"):
        return []
    return [name, name.split("_")[0]] if "_" in name else [name]


def catalog_files(env: Mapping[str, str]) -> list[str]:
    """The toolchain's message catalogs for the build's language."""
    found = []
    for language in language_names(env):
        folder = Path(CATALOG_ROOT, language, "LC_MESSAGES")
        if folder.is_dir():
            found += [str(f) for f in sorted(folder.iterdir()) if CATALOG_DOMAINS.match(f.name)]
    return found


def option_flags(arguments: Sequence[str]) -> tuple[str, ...]:
    """The options of a compile command (its output, inputs and include of the build directory dropped):
    those that decide where the compiler looks."""
    kept, skip = [], False
    for argument in arguments:
        if skip:
            skip = False
        elif argument == "-o":
            skip = True
        elif argument.startswith("-") and argument != "-I.":
            kept.append(argument)
    return tuple(kept)


def program_files(driver: str, dirs: Mapping[str, Sequence[str]]) -> tuple[list[str], list[str]]:
    """The internal programs and plugins the driver runs from its own directories, and the tools it runs from
    PATH (as, ld, unless the compiler has its own)."""
    internal, on_path = [], []
    for name in PROGRAMS:
        if found := find_in(dirs.get("programs", ()), name, executable=True):
            internal.append(found)
        elif found := shutil.which(name, path=SANDBOX_PATH):
            on_path.append(found)
    for name in PLUGINS:
        if found := find_in([*dirs.get("programs", ()), *dirs.get("libraries", ())], name):
            internal.append(found)
    return internal, on_path


def link_files(dirs: Mapping[str, Sequence[str]]) -> list[str]:
    """The libraries, linker scripts and crt files linking reads, with what the scripts name."""
    files = [found for name in LINK_FILES if (found := find_in(dirs.get("libraries", ()), name))]
    named = [p for f in files for p in script_paths(linker_script(f)) if os.path.exists(p)]
    return [*files, *named]


def is_elf(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(4) == b"\x7fELF"
    except OSError:
        return False


def needed_libraries(files: Iterable[str]) -> list[str]:
    """What `ldd` says these ELF files load (the loader included); trusted files, so ldd may run them."""
    elves = sorted({f for f in files if is_elf(f)})
    if not elves:
        return []
    completed = subprocess.run(["ldd", *elves], capture_output=True, text=True, check=False, timeout=60)
    return shared_libraries(completed.stdout)


def header_entries(cxx_dirs: Sequence[str], c_dirs: Sequence[str], compiler_dirs: Sequence[str]) -> tuple[
        list[str], list[str]]:
    """(directories bound whole, entries bound one by one): the compiler's own and the C++ library's
    directories whole; of the other (shared) include directories, the C library's entries only."""
    c_real = {os.path.realpath(d) for d in c_dirs}
    cxx_only = [d for d in cxx_dirs if os.path.realpath(d) not in c_real]
    whole = outermost([*compiler_dirs, *cxx_only])
    entries = []
    for directory in dict.fromkeys(os.path.realpath(d) for d in [*cxx_dirs, *c_dirs]):
        if inside(directory, whole) or not os.path.isdir(directory):
            continue
        entries += [e for e in allowed_entries(directory, os.listdir(directory)) if not inside(e, whole)]
    return whole, entries


def find_driver(compiler: str) -> str:
    """The compiler driver where the sandbox will find it (on its PATH)."""
    driver = compiler if os.path.isabs(compiler) else shutil.which(compiler, path=SANDBOX_PATH)
    if driver is None:
        raise BackendError(f"the C++ compiler {compiler!r} is not in {SANDBOX_PATH}, where its sandbox looks "
                           "for it; install g++ or pass compiler= with an absolute path")
    return driver


@functools.lru_cache(maxsize=8)
def compiler_view(compiler: str, flags: tuple[str, ...], env_items: tuple[tuple[str, str], ...] = (),
                  tree_home: str = "") -> tuple[Mount, ...]:
    """The mounts of a build's sandbox for this compiler, its flags and its locale (see the module's doc).
    With `tree_home` (a directory the sandbox's user can reach, kept while the view is used), the C
    library's headers are shown as a tree built there; without, one mount per header."""
    driver = find_driver(compiler)
    dirs = search_dirs(_ask(driver, "-print-search-dirs"))
    internal, on_path = program_files(driver, dirs)
    # gcc names its installation directory; clang keeps its own headers in its resource directory
    own = dirs.get("install") or [_ask(driver, "-print-resource-dir")]
    path_dirs = {os.path.realpath(d) for d in SANDBOX_PATH.split(":")}  # /usr/bin is everyone's, not the compiler's
    own_dirs = [d for d in [*own, *(os.path.dirname(p) for p in internal)]
                if os.path.isabs(d) and os.path.realpath(d) not in path_dirs]
    whole, entries = header_entries(include_dirs(driver, "c++", flags), include_dirs(driver, "c", flags), own_dirs)
    if os.path.isdir(LOCALE_DATA):
        whole.append(LOCALE_DATA)
    files = [driver, *internal, *on_path, *link_files(dirs)]
    files += needed_libraries(files)
    trees = build_header_tree(entries, whole, Path(tree_home)) if tree_home and entries else []
    mounts: dict[str, Mount] = {m[2]: m for m in trees}
    mounts.update((d, ("ro-bind", d, d)) for d in whole)
    for path in [*([] if trees else entries), *files, *catalog_files(dict(env_items))]:
        for mount in path_mounts(path):
            if not inside(mount[2], whole):
                mounts.setdefault(mount[2], mount)
    return tuple(mounts.values())
