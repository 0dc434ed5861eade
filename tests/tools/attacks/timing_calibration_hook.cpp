// Controls the runner it lives in: its constructor finds the runner's GOT slot for read() (dl_iterate_phdr,
// resolved from libc's own tables) and points it at a hook that answers every request 2 ms late until the
// kernel is first called. If the judge calibrates its round trip on those requests, every later call's time
// is 2 ms too small: the honest relu below (with 0.3 ms of spinning) would time as nothing.
#include "kernelsage_cpu.h"
#include "ks_attack_libc.h"
#include <chrono>
#include <cstdint>
#include <link.h>

namespace {
typedef long (*read_fn)(int, void*, unsigned long);
typedef int (*iterate_fn)(int (*)(struct dl_phdr_info*, size_t, void*), void*);
read_fn real_read;
volatile int kernel_called;

void spin(double seconds) {
    auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < until) {}
}

long hooked_read(int fd, void* buffer, unsigned long n) {
    long got = real_read(fd, buffer, n);
    if (!kernel_called) spin(2e-3);
    return got;
}

int patch_main(struct dl_phdr_info* info, size_t, void* done) {
    if (*static_cast<int*>(done)) return 0;
    *static_cast<int*>(done) = 1;  // the first object is the main program: ks_runner
    uintptr_t bias = info->dlpi_addr;
    const Elf64_Dyn* dyn = 0;
    for (int k = 0; k < info->dlpi_phnum; ++k)
        if (info->dlpi_phdr[k].p_type == PT_DYNAMIC) dyn = (const Elf64_Dyn*)(bias + info->dlpi_phdr[k].p_vaddr);
    const Elf64_Rela* rela = 0;
    const Elf64_Sym* symtab = 0;
    const char* strtab = 0;
    uint64_t size = 0;
    for (; dyn && dyn->d_tag != DT_NULL; ++dyn) {
        if (dyn->d_tag == DT_JMPREL) rela = (const Elf64_Rela*)ks_fix(dyn->d_un.d_ptr, bias);
        if (dyn->d_tag == DT_PLTRELSZ) size = dyn->d_un.d_val;
        if (dyn->d_tag == DT_SYMTAB) symtab = (const Elf64_Sym*)ks_fix(dyn->d_un.d_ptr, bias);
        if (dyn->d_tag == DT_STRTAB) strtab = (const char*)ks_fix(dyn->d_un.d_ptr, bias);
    }
    for (uint64_t k = 0; rela && symtab && strtab && k < size / sizeof(Elf64_Rela); ++k) {
        const char* name = strtab + symtab[ELF64_R_SYM(rela[k].r_info)].st_name;
        if (strcmp(name, "read") == 0) {
            uintptr_t slot = bias + rela[k].r_offset;
            ks_raw(10 /* mprotect */, slot & ~(uintptr_t)4095, 4096, 3);  // in case of RELRO
            *reinterpret_cast<read_fn*>(slot) = hooked_read;
        }
    }
    return 0;
}

__attribute__((constructor)) void take_over_the_runner() {
    real_read = reinterpret_cast<read_fn>(ks_libc("read"));
    iterate_fn iterate = reinterpret_cast<iterate_fn>(ks_libc("dl_iterate_phdr"));
    int done = 0;
    if (real_read && iterate) iterate(patch_main, &done);
}
}  // namespace

int ks_kernel(const ks_tensor* inputs, int, ks_tensor* outputs, int, const ks_attr*, int) {
    kernel_called = 1;
    const float* x = static_cast<const float*>(inputs[0].data);
    float* y = static_cast<float*>(outputs[0].data);
    int64_t n = ks_numel(&inputs[0]);
    spin(3e-4);
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
    return 0;
}
