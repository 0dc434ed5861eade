/*
 * ks_runner: the only process that runs a candidate's code. Built by kernelsage with the system C compiler,
 * started inside the sandbox by the judge (kernelsage.tools.cpu.runner); no Python, torch or BLAS in it.
 *
 *   ks_runner LIBRARY INPUTS_FD INPUTS_BYTES OUTPUTS_FD OUTPUTS_BYTES
 *
 * The tensors live in two memfds the judge created: the inputs one is sealed against writing (so it is mapped
 * read-only here), the outputs one is shared read-write. The runner maps both, installs its seccomp filter
 * (once: the filter has no seccomp() in it, so the library cannot add filters of its own, e.g. one that fakes
 * a later seccomp() call of the runner), says hello and answers the judge's requests on stdin/stdout (struct
 * ks_request / struct ks_reply below). Before the judge asks it to load the library (OP_LOAD) no candidate
 * code has run: the judge calibrates its round trip then. Only the dynamic loader's own code may open files
 * (read-only, checked on the instruction pointer), and the sandbox's file system holds nothing but the
 * runtime libraries. Everything the runner says
 * is untrusted data to the judge: the judge keeps the clock, the reference outputs and the verdict.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kernelsage_cpu.h"

#if defined(__x86_64__)
#define KS_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define KS_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "ks_runner defines its seccomp filter for x86_64 and aarch64 only"
#endif

enum { OP_PING = 1, OP_DEFINE = 2, OP_RUN = 3, OP_QUIT = 4, OP_LOAD = 5 };
enum { ST_OK = 0, ST_ERROR = 1, ST_FAULT = 2, ST_READY = 3 };
#define READY_NONCE 0x6b7372756e6e6572ULL /* "ksrunner" */
#define FAULT_NONCE 0x6b736661756c7421ULL /* "ksfault!" */
#define MAX_SETS 1024
#define MAX_TENSORS 256
#define MAX_ATTRS 256
#define MAX_DEFINE_BYTES (16u << 20)

struct ks_request { uint32_t op, set; uint64_t nonce, slot_offset, length; };
struct ks_reply { uint64_t nonce; int32_t status, value; uint64_t a, b; };
struct ks_set_header { uint32_t n_inputs, n_outputs, n_attrs, reserved; };
struct ks_tensor_desc { uint64_t offset; int32_t dtype, ndim; int64_t shape[KS_MAX_DIMS], strides[KS_MAX_DIMS]; };
struct ks_attr_desc { int32_t kind; uint32_t name_len; int64_t i; double f; uint64_t n_ints, s_len; };

struct set {
    int defined, n_inputs, n_outputs, n_attrs;
    ks_tensor *inputs, *outputs;
    uint64_t *output_offsets, output_extent; /* outputs: offsets within a slot; bytes the slot must hold */
    ks_attr *attrs;
    void *storage; /* the attribute names, integer lists and strings */
};

typedef int (*kernel_fn)(const ks_tensor*, int, ks_tensor*, int, const ks_attr*, int);

static int ctl_in = -1, ctl_out = -1;
static unsigned char *in_base, *out_base;
static uint64_t in_size, out_size;
static struct set sets[MAX_SETS];
static char alt_stack[1 << 16];

static int read_full(int fd, void* buffer, size_t n) {
    unsigned char* p = buffer;
    while (n) {
        ssize_t got = read(fd, p, n);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return -1;
        p += got;
        n -= (size_t)got;
    }
    return 0;
}

static int write_full(int fd, const void* buffer, size_t n) {
    const unsigned char* p = buffer;
    while (n) {
        ssize_t put = write(fd, p, n);
        if (put < 0 && errno == EINTR) continue;
        if (put <= 0) return -1;
        p += put;
        n -= (size_t)put;
    }
    return 0;
}

static void reply(uint64_t nonce, int32_t status, int32_t value, uint64_t a, uint64_t b) {
    struct ks_reply r = {nonce, status, value, a, b};
    if (write_full(ctl_out, &r, sizeof r) != 0) _exit(4);
}

/* A fault (e.g. a write to the read-only inputs) is reported with its address, then the default action ends
 * the process: SA_RESETHAND has restored it, and returning re-executes the faulting instruction. */
static void on_fault(int sig, siginfo_t* info, void* context) {
    (void)context;
    struct ks_reply r = {FAULT_NONCE, ST_FAULT, sig, (uint64_t)(uintptr_t)info->si_addr, 0};
    ssize_t ignored = write(ctl_out, &r, sizeof r);
    (void)ignored;
}

static void install_fault_handlers(void) {
    stack_t stack = {.ss_sp = alt_stack, .ss_size = sizeof alt_stack, .ss_flags = 0};
    sigaltstack(&stack, NULL);
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_fault;
    action.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, NULL);
    sigaction(SIGBUS, &action, NULL);
}

/* ---- seccomp: an allowlist of system calls, built at run time (tgkill is allowed for this process only) ---- */

static struct sock_filter program[512];
static unsigned short length;

static void put(struct sock_filter instruction) {
    if (length >= sizeof program / sizeof program[0]) _exit(5);
    program[length++] = instruction;
}

#define RET(value) put((struct sock_filter)BPF_STMT(BPF_RET | BPF_K, (value)))
#define DENY (SECCOMP_RET_ERRNO | EPERM)
#define ARG_LOW(n) ((uint32_t)offsetof(struct seccomp_data, args[n]))

static void load_nr(void) { put((struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr))); }

static void allow(int nr) {
    put((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 1));
    RET(SECCOMP_RET_ALLOW);
}

static void answer(int nr, uint32_t action) {
    put((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 1));
    RET(action);
}

/* Allowed when all of the mask's bits are set in the argument. */
static void allow_if_all_set(int nr, int arg, uint32_t mask) {
    put((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 5));
    put((struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LOW(arg)));
    put((struct sock_filter)BPF_STMT(BPF_ALU | BPF_AND | BPF_K, mask));
    put((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, mask, 0, 1));
    RET(SECCOMP_RET_ALLOW);
    RET(DENY);
}

static void allow_if_equal(int nr, int arg, uint32_t value) {
    put((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 4));
    put((struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LOW(arg)));
    put((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, value, 0, 1));
    RET(SECCOMP_RET_ALLOW);
    RET(DENY);
}

/* The executable code of the dynamic loader (ld.so): the only code allowed to open files. */
static uint64_t loader_lo, loader_hi;

static void find_loader(void) {
    const unsigned char* base = (const unsigned char*)getauxval(AT_BASE);
    if (!base || memcmp(base, ELFMAG, SELFMAG) != 0) return;
    const ElfW(Ehdr)* header = (const ElfW(Ehdr)*)base;
    const ElfW(Phdr)* segments = (const ElfW(Phdr)*)(base + header->e_phoff);
    for (int k = 0; k < header->e_phnum; ++k)
        if (segments[k].p_type == PT_LOAD && (segments[k].p_flags & PF_X)) {
            loader_lo = (uint64_t)(uintptr_t)base + segments[k].p_vaddr;
            loader_hi = loader_lo + segments[k].p_memsz;
        }
    if (loader_hi && (loader_lo >> 32) != ((loader_hi - 1) >> 32)) loader_lo = loader_hi = 0; /* one BPF word */
}

#define IP_LOW ((uint32_t)offsetof(struct seccomp_data, instruction_pointer))
#define IP_HIGH (IP_LOW + 4) /* little-endian */

/* Allowed when made by the loader's own code (the instruction pointer in its text) and (argument & mask) == 0;
 * else EPERM. A library's constructor, its kernel or a libc wrapper cannot open anything. */
static void allow_loader_if_clear(int nr, int arg, uint32_t mask) {
    if (!loader_hi) { /* the loader's text was not found (or spans two 4 GiB words): read-only from anywhere */
        put((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 4));
        put((struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LOW(arg)));
        put((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, mask, 0, 1));
        RET(DENY);
        RET(SECCOMP_RET_ALLOW);
        return;
    }
    put((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 9));
    put((struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, IP_HIGH));
    put((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)(loader_lo >> 32), 0, 5));
    put((struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, IP_LOW));
    put((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, (uint32_t)loader_lo, 0, 3));
    put((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, (uint32_t)loader_hi, 2, 0));
    put((struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LOW(arg)));
    put((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, mask, 0, 1));
    RET(DENY);
    RET(SECCOMP_RET_ALLOW);
}

static void install_filter(void) {
    length = 0;
    put((struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)));
    put((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, KS_AUDIT_ARCH, 1, 0));
    RET(SECCOMP_RET_KILL_PROCESS);
    load_nr();
#if defined(__x86_64__)
    put((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1)); /* the x32 ABI */
    RET(SECCOMP_RET_KILL_PROCESS);
#endif
    /* memory, threads (OpenMP), time, signals to itself, its pipes */
    const int always[] = {
        __NR_read, __NR_write, __NR_writev, __NR_close, __NR_lseek, __NR_fstat, __NR_newfstatat,
        __NR_mmap, __NR_munmap, __NR_mprotect, __NR_madvise, __NR_mremap, __NR_brk,
        __NR_futex, __NR_sched_yield, __NR_sched_getaffinity, __NR_getcpu, __NR_set_robust_list,
        __NR_rseq, __NR_set_tid_address, __NR_gettid, __NR_getpid,
        __NR_clock_gettime, __NR_clock_getres, __NR_clock_nanosleep, __NR_nanosleep, __NR_gettimeofday,
        __NR_rt_sigaction, __NR_rt_sigprocmask, __NR_rt_sigreturn, __NR_sigaltstack, __NR_restart_syscall,
        __NR_exit, __NR_exit_group, __NR_getrandom,
#ifdef __NR_time
        __NR_time,
#endif
    };
    for (size_t k = 0; k < sizeof always / sizeof always[0]; ++k) allow(always[k]);
    /* threads only: a clone without CLONE_THREAD|CLONE_VM would be a new process */
    allow_if_all_set(__NR_clone, 0, CLONE_THREAD | CLONE_VM | CLONE_SIGHAND);
    answer(__NR_clone3, SECCOMP_RET_ERRNO | ENOSYS); /* its flags are out of the filter's reach: use clone */
    allow_if_equal(__NR_tgkill, 0, (uint32_t)getpid());
    {
        /* the dynamic loader reads the library and its dependencies (the only files in the sandbox besides
         * its own /proc and a minimal /dev): it alone may open files, and only for reading */
        const uint32_t writing = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND | __O_TMPFILE;
        allow_loader_if_clear(__NR_openat, 2, writing);
#ifdef __NR_open
        allow_loader_if_clear(__NR_open, 1, writing);
#endif
        const int loader[] = {__NR_pread64, __NR_readlinkat, __NR_faccessat, __NR_statx, __NR_getcwd,
                              __NR_uname, __NR_sysinfo,
#ifdef __NR_access
                              __NR_access, __NR_readlink, __NR_stat, __NR_lstat,
#endif
        };
        for (size_t k = 0; k < sizeof loader / sizeof loader[0]; ++k) allow(loader[k]);
    }
    RET(DENY);
    struct sock_fprog fprog = {.len = length, .filter = program};
    if (syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &fprog) != 0) {
        fprintf(stderr, "ks_runner: cannot install the seccomp filter: %s\n", strerror(errno));
        _exit(6);
    }
}

/* ---- sets: the tensors and attributes of one input set, described by the judge ---- */

static const uint64_t element_size[] = {4, 8, 2, 2, 4, 8, 1, 1, 1};

static int tensor_bytes(const struct ks_tensor_desc* d, uint64_t* bytes) {
    if (d->dtype < 0 || d->dtype > 8 || d->ndim < 0 || d->ndim > KS_MAX_DIMS) return -1;
    uint64_t n = 1;
    for (int k = 0; k < d->ndim; ++k) {
        if (d->shape[k] < 0 || (d->shape[k] && n > UINT64_MAX / (uint64_t)d->shape[k])) return -1;
        n *= (uint64_t)d->shape[k];
    }
    *bytes = n * element_size[d->dtype];
    return 0;
}

static void fill_tensor(ks_tensor* t, const struct ks_tensor_desc* d, void* data) {
    memset(t, 0, sizeof *t);
    t->data = data;
    t->dtype = d->dtype;
    t->ndim = d->ndim;
    memcpy(t->shape, d->shape, sizeof t->shape);
    memcpy(t->strides, d->strides, sizeof t->strides);
}

static void free_set(struct set* s) {
    free(s->inputs);
    free(s->outputs);
    free(s->output_offsets);
    free(s->attrs);
    free(s->storage);
    memset(s, 0, sizeof *s);
}

/* Takes ownership of `data` (the request), which holds the names, lists and strings the attributes point to. */
static int define_set(struct set* s, unsigned char* data, uint64_t size) {
    free_set(s);
    s->storage = data;
    struct ks_set_header h;
    if (size < sizeof h) return -1;
    memcpy(&h, data, sizeof h);
    if (h.n_inputs > MAX_TENSORS || h.n_outputs > MAX_TENSORS || h.n_attrs > MAX_ATTRS) return -1;
    uint64_t at = sizeof h, n_tensors = h.n_inputs + h.n_outputs;
    if (size - at < n_tensors * sizeof(struct ks_tensor_desc)) return -1;
    s->inputs = calloc(h.n_inputs + 1, sizeof(ks_tensor));
    s->outputs = calloc(h.n_outputs + 1, sizeof(ks_tensor));
    s->output_offsets = calloc(h.n_outputs + 1, sizeof(uint64_t));
    s->attrs = calloc(h.n_attrs + 1, sizeof(ks_attr));
    if (!s->inputs || !s->outputs || !s->output_offsets || !s->attrs) return -1;
    for (uint64_t k = 0; k < n_tensors; ++k, at += sizeof(struct ks_tensor_desc)) {
        struct ks_tensor_desc d;
        uint64_t bytes;
        memcpy(&d, data + at, sizeof d);
        if (tensor_bytes(&d, &bytes) != 0) return -1;
        if (k < h.n_inputs) {
            if (d.offset > in_size || bytes > in_size - d.offset) return -1;
            fill_tensor(&s->inputs[k], &d, in_base + d.offset);
        } else {
            uint64_t o = k - h.n_inputs;
            if (d.offset > out_size || bytes > out_size - d.offset) return -1;
            fill_tensor(&s->outputs[o], &d, out_base);
            s->output_offsets[o] = d.offset;
            if (d.offset + bytes > s->output_extent) s->output_extent = d.offset + bytes;
        }
    }
    for (uint32_t k = 0; k < h.n_attrs; ++k) {
        struct ks_attr_desc d;
        if (size - at < sizeof d) return -1;
        memcpy(&d, data + at, sizeof d);
        at += sizeof d;
        uint64_t ints_bytes = d.n_ints * sizeof(int64_t);
        if (d.n_ints > size || d.s_len > size || d.name_len > size) return -1;
        if (size - at < (uint64_t)d.name_len + 1 + ints_bytes + d.s_len + 1) return -1;
        ks_attr* a = &s->attrs[k];
        a->kind = d.kind;
        a->i = d.i;
        a->f = d.f;
        a->name = (const char*)(data + at); /* the judge sends each name and string NUL-terminated */
        at += d.name_len + 1;
        a->ints = (const int64_t*)(data + at);
        a->n_ints = (int64_t)d.n_ints;
        at += ints_bytes;
        a->s = (const char*)(data + at);
        at += d.s_len + 1;
    }
    s->n_inputs = (int)h.n_inputs;
    s->n_outputs = (int)h.n_outputs;
    s->n_attrs = (int)h.n_attrs;
    s->defined = 1;
    return 0;
}

/* The outputs are populated at once: their pages are allocated here, while the judge is still making inputs,
 * rather than by page faults during the first (warm-up) calls. */
static unsigned char* map_region(int fd, uint64_t size, int prot, int populate) {
    if (size == 0) return NULL;
    void* p = mmap(NULL, size, prot, MAP_SHARED | (populate ? MAP_POPULATE : 0), fd, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, "ks_runner: cannot map %llu bytes: %s\n", (unsigned long long)size, strerror(errno));
        _exit(3);
    }
    return p;
}

int main(int argc, char** argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: ks_runner LIBRARY INPUTS_FD INPUTS_BYTES OUTPUTS_FD OUTPUTS_BYTES\n");
        return 2;
    }
    /* stdin/stdout become the judge's channel; the candidate's own stdout goes to the log (stderr) */
    ctl_in = fcntl(0, F_DUPFD_CLOEXEC, 10);
    ctl_out = fcntl(1, F_DUPFD_CLOEXEC, 10);
    int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (ctl_in < 0 || ctl_out < 0 || null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(2, 1) < 0) return 3;
    close(null_fd);
    int in_fd = atoi(argv[2]), out_fd = atoi(argv[4]);
    in_size = strtoull(argv[3], NULL, 10);
    out_size = strtoull(argv[5], NULL, 10);
    in_base = map_region(in_fd, in_size, PROT_READ, 0);
    out_base = map_region(out_fd, out_size, PROT_READ | PROT_WRITE, 1);
    close(in_fd);
    close(out_fd);
    install_fault_handlers();
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
        fprintf(stderr, "ks_runner: cannot set no_new_privs: %s\n", strerror(errno));
        return 6;
    }
    find_loader();
    install_filter();
    kernel_fn kernel = NULL;
    reply(READY_NONCE, ST_READY, KS_ABI_VERSION, (uint64_t)(uintptr_t)in_base, (uint64_t)(uintptr_t)out_base);
    for (;;) {
        struct ks_request q;
        if (read_full(ctl_in, &q, sizeof q) != 0) return 0;
        if (q.op == OP_PING) {
            reply(q.nonce, ST_OK, 0, 0, 0);
        } else if (q.op == OP_LOAD) {
            if (kernel) return 3;
            void* library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
            kernel = library ? (kernel_fn)dlsym(library, "ks_kernel") : NULL;
            if (!kernel) {
                fprintf(stderr, "ks_runner: %s\n", dlerror());
                reply(q.nonce, ST_ERROR, 0, 0, 0);
                return 3;
            }
            reply(q.nonce, ST_OK, 0, 0, 0);
        } else if (!kernel) {
            reply(q.nonce, ST_ERROR, 0, 0, 0); /* nothing but pings before the library is loaded */
        } else if (q.op == OP_DEFINE) {
            unsigned char* data = q.length <= MAX_DEFINE_BYTES ? malloc(q.length + 1) : NULL;
            if (!data || read_full(ctl_in, data, q.length) != 0) return 3;
            int bad = q.set >= MAX_SETS || define_set(&sets[q.set], data, q.length) != 0;
            if (bad && q.set < MAX_SETS) free_set(&sets[q.set]);
            if (bad && q.set >= MAX_SETS) free(data);
            reply(q.nonce, bad ? ST_ERROR : ST_OK, 0, 0, 0);
        } else if (q.op == OP_RUN) {
            struct set* s = q.set < MAX_SETS ? &sets[q.set] : NULL;
            if (!s || !s->defined || q.slot_offset > out_size || s->output_extent > out_size - q.slot_offset) {
                reply(q.nonce, ST_ERROR, 0, 0, 0);
                continue;
            }
            for (int k = 0; k < s->n_outputs; ++k) s->outputs[k].data = out_base + q.slot_offset + s->output_offsets[k];
            int rc = kernel(s->inputs, s->n_inputs, s->outputs, s->n_outputs, s->attrs, s->n_attrs);
            reply(q.nonce, ST_OK, rc, 0, 0);
        } else {
            return 0;
        }
    }
}
