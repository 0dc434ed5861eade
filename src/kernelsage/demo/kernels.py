"""Kernels the demo's recorded answers contain: a first draft and a faster version per operator."""

from __future__ import annotations

from importlib import resources

BROKEN_RELU = """#include "kernelsage_cpu.h"
int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    const float* x = (const float*)inputs[0].data
    float* y = (float*)outputs[0].data;
    for (int64_t i = 0; i < ks_numel(&inputs[0]); ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
    return 0;
}
"""

ADD = """#include "kernelsage_cpu.h"
#include <cstdint>
int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    const int64_t n = ks_numel(&inputs[0]);
    if (inputs[0].dtype == KS_FLOAT32) {
        const float* a = (const float*)inputs[0].data; const float* b = (const float*)inputs[1].data;
        float* y = (float*)outputs[0].data;
        #pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
        return 0;
    }
    const uint16_t* a = (const uint16_t*)inputs[0].data; const uint16_t* b = (const uint16_t*)inputs[1].data;
    uint16_t* y = (uint16_t*)outputs[0].data;
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] = ks_float_to_half(ks_half_to_float(a[i]) + ks_half_to_float(b[i]));
    return 0;
}
"""

WRONG_ADD = ADD.replace("a[i] + b[i]", "a[i] - b[i]").replace(
    "ks_half_to_float(a[i]) + ks_half_to_float(b[i])", "ks_half_to_float(a[i]) - ks_half_to_float(b[i])")


def example(task_id: str) -> str:
    """A reference kernel shipped with the CPU backend (fast: parallel loops)."""
    if task_id == "l1_add":
        return ADD
    return resources.files("kernelsage.tools.cpu").joinpath("examples", f"{task_id}.cpp").read_text(encoding="utf-8")


_REPEAT = """
#undef ks_kernel
extern "C" int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
                         const ks_attr* attrs, int n_attrs) {
    int status = 0;
    for (int pass = 0; pass < 3 && status == 0; ++pass)  // a first version that does its work three times
        status = ks_kernel_body(inputs, n_inputs, outputs, n_outputs, attrs, n_attrs);
    return status;
}
"""


def first_draft(source: str) -> str:
    """A correct but clearly slow first version of a kernel: serial (no OpenMP pragmas) and repeating
    its work, so the faster version wins by a wide margin however busy the machine is."""
    serial = "\n".join(line for line in source.splitlines() if "#pragma omp" not in line)
    return "#define ks_kernel ks_kernel_body\n" + serial + "\n" + _REPEAT
