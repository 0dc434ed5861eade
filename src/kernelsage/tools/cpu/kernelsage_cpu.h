/*
 * kernelsage CPU kernel ABI, version 1.
 *
 * A candidate kernel is one C++17 file compiled with OpenMP into a shared library. It exports exactly one
 * entry point, ks_kernel, with C linkage (including this header gives the definition C linkage):
 *
 *     #include "kernelsage_cpu.h"
 *     int ks_kernel(const ks_tensor* inputs, int n_inputs,
 *                   ks_tensor* outputs, int n_outputs,
 *                   const ks_attr* attrs, int n_attrs) { ...; return 0; }
 *
 * Contract
 *  - inputs: the task's input tensors in the order of the task's interface. Read-only.
 *  - outputs: allocated by the harness with the shapes and dtypes of the reference's outputs, contiguous
 *    row-major. They are filled with a poison value before every call: every element must be written.
 *  - attrs: the task's scalar attributes by name (look them up with ks_attr_int / ks_attr_float).
 *  - Return 0 on success; any other value is reported as a runtime error.
 *  - Tensors are contiguous row-major; strides (in elements) are given for completeness.
 *  - The kernel must compute its result itself: no PyTorch/ATen/BLAS calls, no file, process or network
 *    access, no state kept between calls. Use as many OpenMP threads as omp_get_max_threads() reports.
 */
#ifndef KERNELSAGE_CPU_H
#define KERNELSAGE_CPU_H

#include <stdint.h>
#include <string.h>

#define KS_ABI_VERSION 1
#define KS_MAX_DIMS 8

typedef enum ks_dtype {
    KS_FLOAT32 = 0,
    KS_FLOAT64 = 1,
    KS_FLOAT16 = 2,  /* IEEE binary16, stored as uint16_t; see ks_half_to_float */
    KS_BFLOAT16 = 3, /* stored as uint16_t; see ks_bf16_to_float */
    KS_INT32 = 4,
    KS_INT64 = 5,
    KS_INT8 = 6,
    KS_UINT8 = 7,
    KS_BOOL = 8      /* one byte per element, 0 or 1 */
} ks_dtype;

typedef struct ks_tensor {
    void* data;
    int32_t dtype;                 /* a ks_dtype */
    int32_t ndim;                  /* 0 for a scalar (one element) */
    int64_t shape[KS_MAX_DIMS];
    int64_t strides[KS_MAX_DIMS];  /* in elements */
} ks_tensor;

typedef enum ks_attr_kind { KS_ATTR_INT = 0, KS_ATTR_FLOAT = 1, KS_ATTR_INTS = 2, KS_ATTR_STRING = 3 } ks_attr_kind;

typedef struct ks_attr {
    const char* name;
    int32_t kind;        /* a ks_attr_kind; booleans are KS_ATTR_INT 0 or 1 */
    int64_t i;           /* KS_ATTR_INT */
    double f;            /* KS_ATTR_FLOAT */
    const int64_t* ints; /* KS_ATTR_INTS: n_ints values */
    int64_t n_ints;
    const char* s;       /* KS_ATTR_STRING */
} ks_attr;

#ifdef __cplusplus
extern "C" {
#endif

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs);

#ifdef __cplusplus
}
#endif

static inline int64_t ks_numel(const ks_tensor* t) {
    int64_t n = 1;
    for (int32_t d = 0; d < t->ndim; ++d) n *= t->shape[d];
    return n;
}

static inline const ks_attr* ks_find_attr(const ks_attr* attrs, int n_attrs, const char* name) {
    for (int a = 0; a < n_attrs; ++a)
        if (strcmp(attrs[a].name, name) == 0) return &attrs[a];
    return 0;
}

/* An attribute as an integer (a float attribute is truncated), or fallback when absent. */
static inline int64_t ks_attr_int(const ks_attr* attrs, int n_attrs, const char* name, int64_t fallback) {
    const ks_attr* a = ks_find_attr(attrs, n_attrs, name);
    if (!a) return fallback;
    return a->kind == KS_ATTR_FLOAT ? (int64_t)a->f : a->i;
}

/* An attribute as a double (an integer attribute is converted), or fallback when absent. */
static inline double ks_attr_float(const ks_attr* attrs, int n_attrs, const char* name, double fallback) {
    const ks_attr* a = ks_find_attr(attrs, n_attrs, name);
    if (!a) return fallback;
    return a->kind == KS_ATTR_FLOAT ? a->f : (double)a->i;
}

/* The bits of a float and back, without breaking strict aliasing. */
static inline float ks_float_from_bits(uint32_t bits) {
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline uint32_t ks_bits_of_float(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    return x;
}

static inline float ks_half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exponent = (h >> 10) & 0x1Fu, mantissa = h & 0x3FFu, bits;
    if (exponent == 0) {
        if (mantissa == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            exponent = 127 - 15 + 1;
            while ((mantissa & 0x400u) == 0) { mantissa <<= 1; --exponent; }
            bits = sign | (exponent << 23) | ((mantissa & 0x3FFu) << 13);
        }
    } else if (exponent == 31) {
        bits = sign | 0x7F800000u | (mantissa << 13);
    } else {
        bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
    }
    return ks_float_from_bits(bits);
}

/* Round to nearest even. */
static inline uint16_t ks_float_to_half(float f) {
    uint32_t x = ks_bits_of_float(f);
    uint32_t sign = (x >> 16) & 0x8000u, abs = x & 0x7FFFFFFFu;
    if (abs >= 0x7F800000u) return (uint16_t)(sign | 0x7C00u | (abs > 0x7F800000u ? 0x200u : 0u));
    if (abs >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u); /* overflow to infinity */
    if (abs < 0x38800000u) {                                   /* subnormal or zero */
        if (abs < 0x33000000u) return (uint16_t)sign;
        uint32_t mantissa = (abs & 0x7FFFFFu) | 0x800000u;
        int shift = 126 - (int)(abs >> 23); /* 14..24 */
        uint32_t half = mantissa >> shift;
        uint32_t rest = mantissa & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
        if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
        return (uint16_t)(sign | half);
    }
    uint32_t rounded = abs + 0xFFFu + ((abs >> 13) & 1u);
    return (uint16_t)(sign | ((rounded - 0x38000000u) >> 13));
}

static inline float ks_bf16_to_float(uint16_t b) {
    return ks_float_from_bits((uint32_t)b << 16);
}

static inline uint16_t ks_float_to_bf16(float f) {
    uint32_t x = ks_bits_of_float(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((x >> 16) | 0x40u); /* keep NaN a NaN */
    return (uint16_t)((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

/*
 * Tunable compile-time parameters (`kernelsage tune`, docs/tuning.md). At file or function scope,
 *
 *     KS_TUNABLE(BLOCK_M, 64, 32, 128);   // the allowed values; the first is the default
 *
 * declares `static constexpr long long BLOCK_M`: the default, or the value the tuner chose, which it writes as
 * `#define KS_TUNE_BLOCK_M KS_TUNED(128)` into ks_tuning.h beside the kernel (or `-DKS_TUNE_BLOCK_M=KS_TUNED(128)`).
 * A value the declaration does not list fails the build. The kernel must be correct for every allowed value.
 */
#ifdef __cplusplus
#define KS_TUNED(value) ~, value /* the comma tells a set KS_TUNE_<name> from an unset one (an identifier) */
#define KS_TUNE_SECOND_(first, second, ...) second
#define KS_TUNE_SECOND(...) KS_TUNE_SECOND_(__VA_ARGS__)
#define KS_TUNE_FIRST_(first, ...) first
#define KS_TUNE_FIRST(...) KS_TUNE_FIRST_(__VA_ARGS__)
template <typename... Allowed>
constexpr bool ks_tune_allowed(long long value, Allowed... allowed) {
    return ((value == (long long)allowed) || ...);
}
#define KS_TUNABLE(name, ...)                                                                              \
    static constexpr long long name = KS_TUNE_SECOND(KS_TUNE_##name, KS_TUNE_FIRST(__VA_ARGS__), ~);     \
    static_assert(ks_tune_allowed(name, __VA_ARGS__), "KS_TUNE_" #name " is not a value KS_TUNABLE lists")
#if defined(__has_include)
#if __has_include("ks_tuning.h")
#include "ks_tuning.h"
#endif
#endif
#endif

#endif /* KERNELSAGE_CPU_H */
