"""The Python runner's seccomp filter: what the candidate's process may ask of the kernel.

Standalone (stdlib only): the judge copies this file into the sandbox as /ks/syscall_filter.py. The runner
installs the filter once, after it has imported torch, triton and the interpreter (and, on a GPU or NPU, made
its device context) and before it reads the candidate's file, so every line of the candidate runs under it.

Built like the cpu runner's filter (tools/cpu/native/ks_runner.c): raw BPF, `no_new_privs` first, the
architecture checked (another ABI, x32 included, kills the process), applied to every thread (TSYNC), a refused
call fails with EPERM, `clone` checked on its flags, `clone3` answered ENOSYS (its flags are out of a filter's
reach; glibc falls back to `clone`), `tgkill` only for this process, `seccomp` refused so the candidate cannot
stack a filter of its own. The one difference is the default: ks_runner allows a short list and refuses the
rest; this filter refuses a list and allows the rest. Python, torch, NumPy and triton call hundreds of
different system calls, varying with their versions, the C library and the device driver (the CUDA driver's
ioctls on /dev/nvidia*, its mmaps of device memory), and an allowlist that missed one would fail honest kernels
at random. What is refused is every class the cpu runner's allowlist keeps out: new processes and programs,
network sockets, other processes (signals, ptrace, their memory), namespaces and mounts, new privileges, and
the kernel interfaces a sandboxed process has no use for (bpf, perf, io_uring, userfaultfd, modules, keys...).

Per device: on `interpret` nothing may start a process (`clone` only with CLONE_THREAD|CLONE_VM|CLONE_SIGHAND,
`fork`/`vfork`/`execve` refused). On `cuda` and `npu` triton compiles each kernel by running an assembler
(ptxas; triton-ascend's compiler on npu), so `fork`/`vfork`/`execve` stay allowed there and `clone` only
without a CLONE_NEW* flag; those programs inherit the filter.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct

# BPF, as in <linux/filter.h> and <linux/bpf_common.h>
LD_W_ABS, ALU_AND_K, JEQ_K, JGE_K, JSET_K, RET_K = 0x20, 0x54, 0x15, 0x35, 0x45, 0x06
# <linux/seccomp.h>, <linux/audit.h>, <linux/prctl.h>, <linux/sched.h>
RET_KILL_PROCESS, RET_ERRNO, RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
SET_MODE_FILTER, FILTER_FLAG_TSYNC, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP = 1, 1, 38, 22
EPERM, ENOSYS = 1, 38
CLONE_THREAD_FLAGS = 0x00010000 | 0x00000100 | 0x00000800  # CLONE_THREAD | CLONE_VM | CLONE_SIGHAND
CLONE_NEW_FLAGS = 0x7E020000  # CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET
NR_OFFSET, ARCH_OFFSET = 0, 4


def arg_offset(index: int) -> int:
    """Where the low 32 bits of argument `index` lie in struct seccomp_data (little-endian)."""
    return 16 + 8 * index


# name: (x86_64, aarch64); None where the architecture has no such call. Checked against the kernel's headers
# by tests/tools/triton/test_syscall_filter.py.
SYSCALLS: dict[str, tuple[int | None, int | None]] = {
    "clone": (56, 220), "clone3": (435, 435), "fork": (57, None), "vfork": (58, None), "execve": (59, 221),
    "execveat": (322, 281), "tgkill": (234, 131), "prctl": (157, 167), "seccomp": (317, 277),
    # signals to other processes
    "kill": (62, 129), "tkill": (200, 130), "rt_sigqueueinfo": (129, 138), "rt_tgsigqueueinfo": (297, 240),
    "pidfd_open": (434, 434), "pidfd_send_signal": (424, 424), "pidfd_getfd": (438, 438),
    # other processes' memory
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271), "kcmp": (312, 272),
    "process_madvise": (440, 440), "move_pages": (279, 239), "migrate_pages": (256, 238),
    # the network
    "socket": (41, 198), "socketpair": (53, 199),
    # namespaces, mounts, the file system's structure
    "setns": (308, 268), "unshare": (272, 97), "mount": (165, 40), "umount2": (166, 39), "pivot_root": (155, 41),
    "chroot": (161, 51), "open_tree": (428, 428), "move_mount": (429, 429), "fsopen": (430, 430),
    "fsconfig": (431, 431), "fsmount": (432, 432), "fspick": (433, 433), "mount_setattr": (442, 442),
    "mknod": (133, None), "mknodat": (259, 33), "open_by_handle_at": (304, 265), "name_to_handle_at": (303, 264),
    # privileges and identity
    "setuid": (105, 146), "setgid": (106, 144), "setreuid": (113, 145), "setregid": (114, 143),
    "setresuid": (117, 147), "setresgid": (119, 149), "setfsuid": (122, 151), "setfsgid": (123, 152),
    "setgroups": (116, 159), "capset": (126, 91), "personality": (135, 92),
    # kernel interfaces a sandboxed kernel has no use for
    "bpf": (321, 280), "perf_event_open": (298, 241), "userfaultfd": (323, 282), "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426), "io_uring_register": (427, 427), "keyctl": (250, 219), "add_key": (248, 217),
    "request_key": (249, 218), "init_module": (175, 105), "finit_module": (313, 273), "delete_module": (176, 106),
    "kexec_load": (246, 104), "kexec_file_load": (320, 294), "reboot": (169, 142), "swapon": (167, 224),
    "swapoff": (168, 225), "acct": (163, 89), "syslog": (103, 116), "quotactl": (179, 60),
    "fanotify_init": (300, 262), "lookup_dcookie": (212, 18), "vhangup": (153, 58), "iopl": (172, None),
    "ioperm": (173, None), "modify_ldt": (154, None), "uselib": (134, None),
    # the host's clocks and names
    "settimeofday": (164, 170), "clock_settime": (227, 112), "clock_adjtime": (305, 266), "adjtimex": (159, 171),
    "sethostname": (170, 161), "setdomainname": (171, 162),
}
# refused on every device (clone, clone3, tgkill, prctl and the process calls have rules of their own)
DENIED = tuple(name for name in SYSCALLS if name not in {
    "clone", "clone3", "fork", "vfork", "execve", "execveat", "tgkill", "prctl"})
PROCESS_CALLS = ("fork", "vfork", "execve", "execveat")
ARCHES = {"x86_64": (0, 0xC000003E), "aarch64": (1, 0xC00000B7)}  # column in SYSCALLS, AUDIT_ARCH_*


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def starts_processes(device: str) -> bool:
    """Whether the device's triton runs programs (an assembler) while it compiles the candidate's kernels."""
    return device != "interpret"


class Program:
    """A BPF program under construction; each rule tests the call number held in the accumulator."""

    def __init__(self) -> None:
        self.code: list[tuple[int, int, int, int]] = []

    def put(self, code: int, k: int, jt: int = 0, jf: int = 0) -> None:
        self.code.append((code, jt, jf, k & 0xFFFFFFFF))

    def answer(self, nr: int, value: int) -> None:
        self.put(JEQ_K, nr, 0, 1)
        self.put(RET_K, value)

    def allow_if_all_set(self, nr: int, arg: int, mask: int) -> None:
        self.put(JEQ_K, nr, 0, 5)
        self.put(LD_W_ABS, arg_offset(arg))
        self.put(ALU_AND_K, mask)
        self.put(JEQ_K, mask, 0, 1)
        self.put(RET_K, RET_ALLOW)
        self.put(RET_K, RET_ERRNO | EPERM)

    def deny_if_any_set(self, nr: int, arg: int, mask: int) -> None:
        self.put(JEQ_K, nr, 0, 4)
        self.put(LD_W_ABS, arg_offset(arg))
        self.put(JSET_K, mask, 0, 1)
        self.put(RET_K, RET_ERRNO | EPERM)
        self.put(RET_K, RET_ALLOW)

    def only_if_equal(self, nr: int, arg: int, value: int, allowed: bool) -> None:
        """Allowed when argument `arg` equals value (refused otherwise), or refused when it does."""
        inside, outside = (RET_ALLOW, RET_ERRNO | EPERM) if allowed else (RET_ERRNO | EPERM, RET_ALLOW)
        self.put(JEQ_K, nr, 0, 4)
        self.put(LD_W_ABS, arg_offset(arg))
        self.put(JEQ_K, value, 0, 1)
        self.put(RET_K, inside)
        self.put(RET_K, outside)

    def packed(self) -> bytes:
        return b"".join(struct.pack("=HBBI", code, jt, jf, k) for code, jt, jf, k in self.code)


def build(device: str, pid: int, machine: str | None = None) -> bytes:
    """The filter for a runner on `device` whose process id (in its own pid namespace) is pid."""
    machine = machine or platform.machine()
    if machine not in ARCHES:
        raise OSError(f"the runner's seccomp filter is defined for x86_64 and aarch64 only, not {machine}")
    column, audit_arch = ARCHES[machine]

    def nr(name: str) -> int | None:
        return SYSCALLS[name][column]

    program = Program()
    program.put(LD_W_ABS, ARCH_OFFSET)
    program.put(JEQ_K, audit_arch, 1, 0)
    program.put(RET_K, RET_KILL_PROCESS)
    program.put(LD_W_ABS, NR_OFFSET)
    if machine == "x86_64":
        program.put(JGE_K, 0x40000000, 0, 1)  # the x32 ABI
        program.put(RET_K, RET_KILL_PROCESS)
    numbers = [nr(name) for name in DENIED]
    if not starts_processes(device):
        numbers += [nr(name) for name in PROCESS_CALLS]
        program.allow_if_all_set(SYSCALLS["clone"][column], 0, CLONE_THREAD_FLAGS)  # threads, not processes
    else:
        program.deny_if_any_set(SYSCALLS["clone"][column], 0, CLONE_NEW_FLAGS)  # no new namespaces
    program.answer(SYSCALLS["clone3"][column], RET_ERRNO | ENOSYS)
    program.only_if_equal(SYSCALLS["tgkill"][column], 0, pid, allowed=True)  # signals to its own threads only
    program.only_if_equal(SYSCALLS["prctl"][column], 0, PR_SET_SECCOMP, allowed=False)
    for number in numbers:
        if number is not None:
            program.answer(number, RET_ERRNO | EPERM)
    program.put(RET_K, RET_ALLOW)
    return program.packed()


def install(device: str) -> None:
    """Install the filter on every thread of this process, for good; OSError when the kernel refuses it."""
    code = build(device, os.getpid())
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    buffer = ctypes.create_string_buffer(code, len(code))
    program = SockFprog(len(code) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    seccomp_nr = SYSCALLS["seccomp"][ARCHES[platform.machine()][0]]
    libc.syscall.restype = ctypes.c_long
    if libc.syscall(ctypes.c_long(seccomp_nr), ctypes.c_long(SET_MODE_FILTER), ctypes.c_long(FILTER_FLAG_TSYNC),
                    ctypes.byref(program)) != 0:
        raise OSError(ctypes.get_errno(), f"cannot install the seccomp filter: {os.strerror(ctypes.get_errno())}")
