"""What a built kernel may link against: its undefined dynamic symbols and needed libraries, checked by class.

A kernel computes on memory it is given. It may call the C math library, memory and string functions,
the OpenMP runtime (its only way to use threads), the C++ runtime's basics (allocation, exceptions,
containers' helpers) and print to stdout/stderr. Anything else (files, processes, dynamic loading, sockets,
raw system calls, its own threads, memory protection, signals, clocks of other processes, BLAS, PyTorch...)
makes the build FORBIDDEN with the symbol named. This is a policy on the library, checked by the trusted side
after every build; the seccomp filter of the runner is what enforces the same boundary at run time.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

POLICY_VERSION = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]  # in the cache key

_MATH_BASE = ["acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "ceil", "copysign", "cos", "cosh", "erf", "erfc", "exp", "exp10", "exp2", "expm1", "fabs", "fdim", "floor", "fma", "fmax", "fmin", "fmod", "frexp", "hypot", "ilogb", "ldexp", "lgamma", "llrint", "llround", "log", "log10", "log1p", "log2", "logb", "lrint", "lround", "modf", "nan", "nearbyint", "nextafter", "nexttoward", "pow", "remainder", "remquo", "rint", "round", "scalbln", "scalbn", "sin", "sincos", "sinh", "sqrt", "tan", "tanh", "tgamma", "trunc", "j0", "j1", "jn", "y0", "y1", "yn", "significand"]
MATH = frozenset(name + suffix for name in _MATH_BASE for suffix in ("", "f", "l")) | frozenset(
    f"__{name}{suffix}_finite" for name in _MATH_BASE for suffix in ("", "f", "l"))
MEMORY_AND_STRINGS = frozenset(["memcpy", "memmove", "memset", "memcmp", "memchr", "memrchr", "strlen", "strnlen", "strcmp", "strncmp", "strcpy", "strncpy", "strcat", "strncat", "strchr", "strrchr", "strstr", "strspn", "strcspn", "strtol", "strtoll", "strtoul", "strtoull", "strtod", "strtof", "strtold", "atoi", "atol", "atoll", "atof", "malloc", "calloc", "realloc", "free", "aligned_alloc", "posix_memalign", "memalign", "malloc_usable_size", "qsort", "bsearch", "abs", "labs", "llabs", "div", "ldiv", "lldiv", "rand", "rand_r", "srand", "__errno_location", "__ctype_b_loc", "__ctype_tolower_loc", "__ctype_toupper_loc", "tolower", "toupper", "__memcpy_chk", "__memmove_chk", "__memset_chk", "__strcpy_chk", "__strncpy_chk", "__strcat_chk", "__explicit_bzero_chk", "explicit_bzero", "bzero", "abort", "__assert_fail", "__stack_chk_fail", "__chk_fail", "__tls_get_addr", "__cxa_finalize", "__cxa_atexit", "__cxa_thread_atexit_impl", "__gmon_start__", "_ITM_deregisterTMCloneTable", "_ITM_registerTMCloneTable", "__dso_handle"])
PRINTING = frozenset(["printf", "fprintf", "vprintf", "vfprintf", "sprintf", "snprintf", "vsprintf", "vsnprintf", "puts", "putchar", "fputs", "fputc", "putc", "fwrite", "fflush", "perror", "stdout", "stderr", "__printf_chk", "__fprintf_chk", "__sprintf_chk", "__snprintf_chk", "__vsnprintf_chk", "__vfprintf_chk", "__vprintf_chk", "__vsprintf_chk"])
CLOCKS = frozenset(["clock", "clock_gettime", "gettimeofday", "time"])
THREAD_SYNC = frozenset(["pthread_mutex_lock", "pthread_mutex_unlock", "pthread_mutex_trylock", "pthread_mutex_init", "pthread_mutex_destroy", "pthread_once", "pthread_spin_lock", "pthread_spin_unlock", "pthread_spin_init", "pthread_spin_destroy", "pthread_self", "sched_yield"])
ALLOWED_NAMES = MATH | MEMORY_AND_STRINGS | PRINTING | CLOCKS | THREAD_SYNC

# Itanium C++ ABI names: allocation, exceptions, type info, the helpers of containers and of ostreams
# on stdout/stderr, and std::chrono clocks. File streams, std::thread, std::filesystem etc. are not here.
ALLOWED_PATTERNS = tuple(re.compile(p) for p in (
    r"GOMP_\w+", r"omp_\w+",  # OpenMP
    r"_ZGV\w+",  # libmvec: vectorised math
    r"_Zn[wa]\w*", r"_Zd[la]\w*",  # operator new / delete
    r"__cxa_\w+", r"__gxx_personality_v0", r"__gcc_personality_v0", r"_Unwind_\w+",
    r"_ZSt\d+__throw_\w+", r"_ZSt9terminatev", r"_ZSt\d+(uncaught_exception|get_terminate|set_terminate)\w*",
    r"_ZT[ISV]N10__cxxabiv1\w+", r"_ZT[ISV]St\d+(bad_\w+|exception|logic_error|runtime_error|length_error|"
    r"out_of_range|invalid_argument|overflow_error|range_error|domain_error|underflow_error)\w*",
    r"_ZNSt\d+(bad_\w+|exception|logic_error|runtime_error|length_error|out_of_range|invalid_argument)\w*",
    r"_ZNKSt\d+(bad_\w+|exception|logic_error|runtime_error)\w*", r"_ZT[IS][a-z]", r"_ZT[IS]P\w+",
    r"_ZSt\d+_Rb_tree_\w+", r"_ZSt2\d_Rb_tree_\w+", r"_ZNSt8__detail15_List_node_base\w+",
    r"_ZNKSt8__detail20_Prime_rehash_policy\w+", r"_ZNSt8__detail15_Hash_node_base\w*",
    r"_ZNSt7__cxx1112basic_string\w+", r"_ZNKSt7__cxx1112basic_string\w+", r"_ZNSt7__cxx119to_string\w*",
    r"_ZSt4cout", r"_ZSt4cerr", r"_ZSt4endl\w*", r"_ZNSo\w+", r"_ZNKSo\w+", r"_ZStlsI\w+",
    r"_ZSt16__ostream_insert\w+", r"_ZNSt8ios_base4Init\w+", r"_ZNKSt5ctypeIcE\w+", r"_ZNSt9basic_ios\w+",
    r"_ZNKSt9basic_ios\w+", r"_ZNSt6chrono3_V21[25](steady|system)_clock3nowEv", r"_ZSt15__once_callable",
    r"_ZSt11__once_call", r"__once_proxy",
))

# Why a symbol outside the allowlist is there, by class (the first match names the class).
FORBIDDEN_CLASSES = tuple((re.compile(p), reason) for p, reason in (
    (r"(cblas_|[sdcz](gemm|gemv|axpy|dot|syrk|trsm)_?$|mkl_|dnnl_|openblas|lapack|LAPACKE|_ZN(2at|3c10|5torch|6caffe2)|"
     r"Eigen)", "calls a high-level library instead of computing the kernel itself"),
    (r"^(dlopen|dlmopen|dlsym|dlvsym|dladdr|dl_iterate_phdr|_dl_\w+)$", "loads code at run time"),
    (r"^(system|popen|fork|vfork|_Fork|clone\w*|posix_spawn\w*|exec\w*|fexecve|daemon|wait\w*)$",
     "spawns a process"),
    (r"^(pthread_create|pthread_detach|pthread_kill|pthread_cancel|thrd_create)$|_ZNSt6thread",
     "starts threads outside OpenMP"),
    (r"^(socket|connect|bind|listen|accept4?|send\w*|recv\w*|getaddrinfo|gethostbyname\w*|socketpair)$",
     "opens a network connection"),
    (r"^(syscall|ptrace|prctl|seccomp|setns|unshare|mount|umount2?|chroot|pivot_root|setuid|setgid|capset)$",
     "makes raw or privileged system calls"),
    (r"^(kill|tgkill|tkill|raise|signal|sigaction|sigprocmask|setjmp|longjmp|_setjmp|__sigsetjmp|siglongjmp|"
     r"__longjmp_chk|sigaltstack)$", "sends signals or handles them (it hides crashes from the harness)"),
    (r"^(mmap\w*|munmap|mprotect|mremap|madvise|pkey_\w+|brk|sbrk|shm\w+|memfd_create|process_vm_\w+)$",
     "manages memory mappings or protections itself"),
    (r"^(open\w*|fopen\w*|freopen\w*|creat\w*|fdopen|read|write|pread\w*|pwrite\w*|close|unlink\w*|remove|"
     r"rename\w*|truncate\w*|ftruncate\w*|opendir|fdopendir|readdir\w*|stat\w*|lstat\w*|fstat\w*|__x?stat\w*|"
     r"access|faccessat|chmod|chown|mkdir\w*|readlink\w*|symlink\w*|link\w*|dup\d?|ioctl|fcntl\w*|"
     r"getenv|secure_getenv|setenv|putenv|__libc_\w+)$|_ZNSt\d+basic_[io]?fstream|_ZNSt\d+basic_filebuf|"
     r"_ZNSt10filesystem", "reaches files, devices or the environment"),
    (r"^(exit|_exit|_Exit|quick_exit|atexit|at_quick_exit)$", "ends the process"),
))

ALLOWED_LIBRARIES = re.compile(r"(libc|libm|libmvec|libgomp|libstdc\+\+|libgcc_s|ld-linux[\w.-]*|"
                               r"libpthread|libdl|librt)\.so(\.\d+)*")


def is_allowed(symbol: str) -> bool:
    name = symbol.split("@", 1)[0]
    return name in ALLOWED_NAMES or any(p.fullmatch(name) for p in ALLOWED_PATTERNS)


def why_forbidden(symbol: str) -> str:
    name = symbol.split("@", 1)[0]
    for pattern, reason in FORBIDDEN_CLASSES:
        if pattern.search(name):
            return reason
    return "is not on the runtime allowlist (C math, memory and string functions, OpenMP, the C++ runtime)"


def undefined_symbols(nm_output: str) -> list[str]:
    """Names from `nm -D --undefined-only` (U and weak w/v lines), without version suffixes."""
    names = []
    for line in nm_output.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[-2] in ("U", "w", "v", "V"):
            names.append(parts[-1].split("@", 1)[0])
    return names


def needed_libraries(readelf_output: str) -> list[str]:
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", readelf_output)


def forbidden_links(symbols: list[str], libraries: list[str]) -> list[tuple[str, str]]:
    """(symbol or library, why) for everything the library may not link against, in a stable order."""
    problems = [(name, why_forbidden(name)) for name in sorted(set(symbols)) if not is_allowed(name)]
    problems += [(f"library {lib}", "links a library outside the C/C++/OpenMP runtime")
                 for lib in sorted(set(libraries)) if not ALLOWED_LIBRARIES.fullmatch(lib)]
    return problems
