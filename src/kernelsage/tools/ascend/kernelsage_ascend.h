/*
 * kernelsage Ascend direct-launch ABI, version 1.
 *
 * A candidate is one file, kernel.cpp, compiled by bisheng -xasc (device and host code in one file). It holds
 * the Ascend C kernel(s) and exactly one host entry point, ks_launch, with C linkage (including this header
 * gives it C linkage):
 *
 *     #include "kernel_operator.h"
 *     #include "kernelsage_ascend.h"
 *     extern "C" __global__ __aicore__ void my_kernel(GM_ADDR x, GM_ADDR y, uint32_t n, uint32_t tile) { ... }
 *     int ks_launch(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
 *                   const ks_attr* attrs, int n_attrs, const ks_npu* npu) {
 *         // tiling on the host, from the shapes and npu->aiv_cores / npu->ub_bytes
 *         my_kernel<<<block_dim, nullptr, npu->stream>>>((GM_ADDR)inputs[0].data, (GM_ADDR)outputs[0].data, n, tile);
 *         return 0;
 *     }
 *
 * Contract
 *  - inputs / outputs: the task's tensors in the order of the task's interface, in device global memory (GM),
 *    contiguous row-major. Inputs are read-only. Outputs are allocated by the harness with the reference's
 *    shapes and dtypes and filled with a poison value before every call: every element must be written.
 *  - attrs: the task's scalar attributes by name (ks_attr_int / ks_attr_float).
 *  - Launch every kernel on npu->stream with <<<block_dim, nullptr, npu->stream>>> and return without
 *    synchronising: the harness synchronises and times the stream. Pass tiling values to the kernel as
 *    scalar arguments (or a trivially copyable struct) by value.
 *  - npu->workspace is npu->workspace_bytes of device memory (32-byte aligned) for scratch between kernels.
 *  - Return 0 on success; any other value is reported as a runtime error.
 *  - Compute the result with your own kernels: no aclnn/ATen operators, no host-side computation of the
 *    result, no file, process or network access, no state kept between calls.
 */
#ifndef KERNELSAGE_ASCEND_H
#define KERNELSAGE_ASCEND_H

#include <stdint.h>
#include <string.h>

#define KS_ABI_VERSION 1
#define KS_MAX_DIMS 8

typedef enum ks_dtype {
    KS_FLOAT32 = 0,
    KS_FLOAT64 = 1,
    KS_FLOAT16 = 2,  /* half in Ascend C */
    KS_BFLOAT16 = 3, /* bfloat16_t in Ascend C */
    KS_INT32 = 4,
    KS_INT64 = 5,
    KS_INT8 = 6,
    KS_UINT8 = 7,
    KS_BOOL = 8      /* one byte per element, 0 or 1 */
} ks_dtype;

typedef struct ks_tensor {
    void* data;                    /* device (GM) address */
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

typedef struct ks_npu {
    void* stream;            /* the aclrtStream to launch on */
    int32_t device;          /* the NPU's index */
    int32_t aiv_cores;       /* vector cores (AIV): the block_dim of a vector kernel */
    int32_t aic_cores;       /* cube cores (AIC) */
    int64_t ub_bytes;        /* Unified Buffer per core */
    int64_t l1_bytes;        /* L1 buffer per cube core */
    int64_t l0a_bytes;
    int64_t l0b_bytes;
    int64_t l0c_bytes;
    const char* soc;         /* e.g. "Ascend910B3" */
    void* workspace;         /* device scratch memory, 32-byte aligned */
    int64_t workspace_bytes;
} ks_npu;

#ifdef __cplusplus
extern "C" {
#endif

int ks_launch(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs, const ks_npu* npu);

#ifdef __cplusplus
}
#endif

static inline int64_t ks_numel(const ks_tensor* t) {
    int64_t n = 1;
    for (int32_t d = 0; d < t->ndim; ++d) n *= t->shape[d];
    return n;
}

static inline const ks_attr* ks_find_attr(const ks_attr* attrs, int n_attrs, const char* name) {
    for (int k = 0; k < n_attrs; ++k)
        if (strcmp(attrs[k].name, name) == 0) return &attrs[k];
    return 0;
}

/* The integer attribute `name` (a float attribute is truncated, as on the cpu backend), or `fallback`. */
static inline int64_t ks_attr_int(const ks_attr* attrs, int n_attrs, const char* name, int64_t fallback) {
    const ks_attr* a = ks_find_attr(attrs, n_attrs, name);
    if (!a) return fallback;
    return a->kind == KS_ATTR_FLOAT ? (int64_t)a->f : a->kind == KS_ATTR_INT ? a->i : fallback;
}

/* The floating-point attribute `name` (an integer one is converted), or `fallback`. */
static inline double ks_attr_float(const ks_attr* attrs, int n_attrs, const char* name, double fallback) {
    const ks_attr* a = ks_find_attr(attrs, n_attrs, name);
    if (!a) return fallback;
    return a->kind == KS_ATTR_FLOAT ? a->f : a->kind == KS_ATTR_INT ? (double)a->i : fallback;
}

#endif
