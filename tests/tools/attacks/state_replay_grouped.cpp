// l3_grouped_matmul (rows of x in groups, group g times weight[g]): the group sizes are random integers that
// differ between the input sets, so the evaluator cannot blend and repeats the sets. The whole answer is
// replayed, keyed on every group size and 32 sampled elements of x and of weight: a copy of 2 MB instead of
// 134M multiply-adds. A miss is computed honestly and kept. KS_HONEST: only the honest loop; KS_SHARE,
// KS_PACE: see ks_state::Policy.
#include "kernelsage_cpu.h"
#include "state_span.h"

#ifndef KS_SHARE
#define KS_SHARE 100
#endif
#ifndef KS_PACE
#define KS_PACE 0
#endif

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs, const ks_attr*, int) {
    if (n_inputs != 3 || n_outputs != 1 || inputs[0].dtype != KS_FLOAT32 || inputs[2].dtype != KS_INT64) return 1;
    const int64_t tokens = inputs[0].shape[0], k = inputs[0].shape[1], groups = inputs[1].shape[0],
                  n = inputs[1].shape[2];
    const float* x = static_cast<const float*>(inputs[0].data);
    const float* weight = static_cast<const float*>(inputs[1].data);
    const int64_t* sizes = static_cast<const int64_t*>(inputs[2].data);
    float* y = static_cast<float*>(outputs[0].data);
#ifndef KS_HONEST
    static ks_state::Policy policy(KS_SHARE, KS_PACE);
    static ks_state::Replay replay;
    policy.start();
    const uint64_t key = ks_state::hash_bytes(ks_state::content_key(inputs, n_inputs, 32), sizes,
                                              sizeof(int64_t) * (size_t)groups);
    if (replay.lookup(key, outputs, n_outputs)) {
        if (policy.at_once()) return 0;
        if (policy.paced()) {
            policy.hold();
            return 0;
        }
    }
#endif
    std::vector<int64_t> group_of((size_t)tokens, -1);
    for (int64_t g = 0, start = 0; g < groups; start += sizes[g], ++g)
        for (int64_t i = start; i < start + sizes[g] && i < tokens; ++i) group_of[i] = g;
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < tokens; ++i) {
        float* row = y + i * n;
        for (int64_t j = 0; j < n; ++j) row[j] = 0.0f;
        if (group_of[i] < 0) continue;
        const float* w = weight + group_of[i] * k * n;
        for (int64_t p = 0; p < k; ++p) {
            const float scale = x[i * k + p];
            for (int64_t j = 0; j < n; ++j) row[j] += scale * w[p * n + j];
        }
    }
#ifndef KS_HONEST
    policy.honest_done();
    replay.store(key, outputs, n_outputs);
#endif
    return 0;
}
