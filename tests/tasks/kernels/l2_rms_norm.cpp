// Honest l2_rms_norm: float32, and float16 with the mean square accumulated in float (`keep` rounds each
// partial sum to the accumulator's precision: none here).
#include "kernelsage_cpu.h"
#include <cmath>
#include <cstdint>

template <typename T, typename Load, typename Store, typename Keep>
static void rms_norm(const T* x, const T* w, T* y, int64_t rows, int64_t n, float eps, Load load, Store store,
                     Keep keep) {
    for (int64_t r = 0; r < rows; ++r) {
        float squares = 0.0f;
        for (int64_t j = 0; j < n; ++j) squares = keep(squares + load(x[r * n + j]) * load(x[r * n + j]));
        const float scale = 1.0f / std::sqrt(squares / n + eps);
        for (int64_t j = 0; j < n; ++j) y[r * n + j] = store(load(x[r * n + j]) * scale * load(w[j]));
    }
}

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs,
              const ks_attr* attrs, int n_attrs) {
    const int64_t n = inputs[0].shape[inputs[0].ndim - 1];
    const int64_t rows = ks_numel(&inputs[0]) / n;
    const float eps = (float)ks_attr_float(attrs, n_attrs, "eps", 1e-6);
    if (inputs[0].dtype == KS_FLOAT32) {
        rms_norm((const float*)inputs[0].data, (const float*)inputs[1].data, (float*)outputs[0].data, rows, n, eps,
                 [](float v) { return v; }, [](float v) { return v; }, [](float v) { return v; });
        return 0;
    }
    if (inputs[0].dtype == KS_FLOAT16) {
        rms_norm((const uint16_t*)inputs[0].data, (const uint16_t*)inputs[1].data, (uint16_t*)outputs[0].data, rows,
                 n, eps, ks_half_to_float, ks_float_to_half, [](float v) { return v; });  // the sum kept in float
        return 0;
    }
    return 1;
}
