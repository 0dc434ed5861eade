// l3_addmm (out = beta * c + alpha * (a @ b)): a quadratic part and a linear one; on blends (coordinates
// summing to one) both are one quadratic form of the coordinates, so the span model of state_span.h (degree
// 2) answers later blends as a combination of ten kept answers, after four elements checked honestly.
// KS_HONEST: only the honest loop; KS_SHARE, KS_PACE: see ks_state::Policy.
#include "kernelsage_cpu.h"
#include "state_span.h"

#ifndef KS_SHARE
#define KS_SHARE 100
#endif
#ifndef KS_PACE
#define KS_PACE 0
#endif

namespace {
void addmm(const float* a, const float* b, const float* c, float* out, int64_t m, int64_t k, int64_t n,
           float alpha, float beta) {
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < m; ++i) {
        float* row = out + i * n;
        for (int64_t j = 0; j < n; ++j) row[j] = 0.0f;
        for (int64_t p = 0; p < k; ++p) {
            const float scale = a[i * k + p];
            const float* brow = b + p * n;
            for (int64_t j = 0; j < n; ++j) row[j] += scale * brow[j];
        }
        for (int64_t j = 0; j < n; ++j) row[j] = beta * c[i * n + j] + alpha * row[j];
    }
}
}  // namespace

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs, const ks_attr* attrs,
              int n_attrs) {
    if (n_inputs != 3 || n_outputs != 1 || inputs[0].dtype != KS_FLOAT32) return 1;
    const int64_t m = inputs[0].shape[0], k = inputs[0].shape[1], n = inputs[1].shape[1];
    const float* a = static_cast<const float*>(inputs[0].data);
    const float* b = static_cast<const float*>(inputs[1].data);
    const float* c = static_cast<const float*>(inputs[2].data);
    float* out = static_cast<float*>(outputs[0].data);
    const float alpha = (float)ks_attr_float(attrs, n_attrs, "alpha", 1.0);
    const float beta = (float)ks_attr_float(attrs, n_attrs, "beta", 1.0);
#ifdef KS_HONEST
    addmm(a, b, c, out, m, k, n, alpha, beta);
#else
    static ks_state::Plan plan(2, KS_SHARE, KS_PACE);
    std::vector<double> s;
    const int which[] = {0, 1, 2}, per[] = {24, 24, 24};
    ks_state::sample_inputs(inputs, which, per, 3, s);
    ks_state::serve(
        plan, ks_state::shape_key(inputs, n_inputs) ^ ks_state::mix((uint64_t)(alpha * 1e6) + (uint64_t)(beta * 1e3)),
        s, m * n, 4,
        [&](float* answer) { addmm(a, b, c, answer, m, k, n, alpha, beta); },
        [&](int64_t e) {
            const int64_t i = e / n, j = e % n;
            double total = 0.0;
            for (int64_t p = 0; p < k; ++p) total += (double)a[i * k + p] * b[p * n + j];
            return (double)beta * c[e] + (double)alpha * total;
        },
        [&](const float* answer) { std::memcpy(out, answer, sizeof(float) * (size_t)(m * n)); });
#endif
    return 0;
}
