/*
 * Helpers of the attack kernels: raw system calls (no libc symbol for the link check to see), and any libc
 * function found at run time by walking libc's own ELF tables from an allowed symbol's address, so that the
 * library's undefined symbols stay on the allowlist while it calls fork, dlopen, pthread_create...
 */
#ifndef KS_ATTACK_LIBC_H
#define KS_ATTACK_LIBC_H

#include <elf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* the asm keyword, token-pasted: a source scan does not see it (the sandbox must not rely on one) */
#define KS_CAT(a, b) a##b
#define KS_ASM KS_CAT(__as, m__)

static inline long ks_raw(long nr, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0, long f = 0) {
    long ret;
    register long r10 KS_ASM("r10") = d;
    register long r8 KS_ASM("r8") = e;
    register long r9 KS_ASM("r9") = f;
    KS_ASM volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
}

/* libc's load address: scan down page by page from a libc function to the ELF header (its segments are
 * mapped contiguously). */
static inline const unsigned char* ks_libc_base() {
    uintptr_t p = (uintptr_t)(void*)&qsort & ~(uintptr_t)4095;
    for (;; p -= 4096) {
        const unsigned char* h = (const unsigned char*)p;
        if (h[0] == 0x7f && h[1] == 'E' && h[2] == 'L' && h[3] == 'F') return h;
    }
}

static inline uintptr_t ks_fix(uintptr_t value, uintptr_t base) { return value < base ? value + base : value; }

/* A dynamic symbol of the object loaded at `base` (linear scan of .dynsym, sized by DT_HASH). */
static inline void* ks_symbol_in(const unsigned char* base, const char* name) {
    const Elf64_Ehdr* eh = (const Elf64_Ehdr*)base;
    const Elf64_Phdr* ph = (const Elf64_Phdr*)(base + eh->e_phoff);
    const Elf64_Dyn* dyn = 0;
    for (int k = 0; k < eh->e_phnum; ++k)
        if (ph[k].p_type == PT_DYNAMIC) dyn = (const Elf64_Dyn*)(base + ph[k].p_vaddr);
    if (!dyn) return 0;
    const Elf64_Sym* symtab = 0;
    const char* strtab = 0;
    const uint32_t* hash = 0;
    uintptr_t b = (uintptr_t)base;
    for (; dyn->d_tag != DT_NULL; ++dyn) {
        if (dyn->d_tag == DT_SYMTAB) symtab = (const Elf64_Sym*)ks_fix(dyn->d_un.d_ptr, b);
        if (dyn->d_tag == DT_STRTAB) strtab = (const char*)ks_fix(dyn->d_un.d_ptr, b);
        if (dyn->d_tag == DT_HASH) hash = (const uint32_t*)ks_fix(dyn->d_un.d_ptr, b);
    }
    if (!symtab || !strtab || !hash) return 0;
    for (uint32_t k = 0; k < hash[1]; ++k)
        if (symtab[k].st_value && strcmp(strtab + symtab[k].st_name, name) == 0)
            return (void*)(b + symtab[k].st_value);
    return 0;
}

static inline void* ks_libc(const char* name) { return ks_symbol_in(ks_libc_base(), name); }

#endif
