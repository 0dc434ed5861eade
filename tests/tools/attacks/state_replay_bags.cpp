// l3_embedding_bag_sum (y[b] = sum_j table[ids[b, j]]): random integer ids differ between the input sets, so
// the evaluator cannot blend them and repeats the sets. Every bag's answer is kept under the exact ids of the
// bag (all of them hashed) and a key of the table (64 sampled elements and its shape): a bag seen before with
// the same table is a copy of d floats instead of per_bag rows gathered, wherever the bag sits. A bag not
// kept is computed honestly. KS_HONEST: only the honest loop; KS_SHARE, KS_PACE: see ks_state::Policy.
#include "kernelsage_cpu.h"
#include "state_span.h"

#include <algorithm>

#ifndef KS_SHARE
#define KS_SHARE 100
#endif
#ifndef KS_PACE
#define KS_PACE 0
#endif

namespace {
void bag(const float* table, const int64_t* ids, int64_t per_bag, int64_t d, float* y) {
    for (int64_t c = 0; c < d; ++c) y[c] = 0.0f;
    for (int64_t j = 0; j < per_bag; ++j) {
        const float* row = table + ids[j] * d;
        for (int64_t c = 0; c < d; ++c) y[c] += row[c];
    }
}
}  // namespace

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs, const ks_attr*, int) {
    if (n_inputs != 2 || n_outputs != 1 || inputs[0].dtype != KS_FLOAT32 || inputs[1].dtype != KS_INT64) return 1;
    const int64_t d = inputs[0].shape[1], bags = inputs[1].shape[0], per_bag = inputs[1].shape[1];
    const float* table = static_cast<const float*>(inputs[0].data);
    const int64_t* ids = static_cast<const int64_t*>(inputs[1].data);
    float* y = static_cast<float*>(outputs[0].data);
#ifdef KS_HONEST
    #pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < bags; ++b) bag(table, ids + b * per_bag, per_bag, d, y + b * d);
#else
    static ks_state::Policy policy(KS_SHARE, KS_PACE);
    static ks_state::RowCache cache;
    static uint64_t shape = 0;
    policy.start();
    const uint64_t here = ks_state::shape_key(inputs, n_inputs);
    if (here != shape) {
        shape = here;
        cache.reset((size_t)bags * 8, sizeof(float) * (size_t)d);
    }
    const uint64_t table_key = ks_state::content_key(inputs, 1, 64);
    std::vector<uint64_t> keys((size_t)bags);
    std::vector<const unsigned char*> hits((size_t)bags);
    int64_t found = 0;
    for (int64_t b = 0; b < bags; ++b) {
        keys[b] = ks_state::mix(ks_state::hash_bytes(table_key, ids + b * per_bag, sizeof(int64_t) * per_bag));
        found += (hits[b] = cache.find(keys[b])) != nullptr;
    }
    bool held = false;
    if (2 * found > bags) {
        const bool at_once = policy.at_once();
        held = !at_once && policy.paced();
        if (!at_once && !held) std::fill(hits.begin(), hits.end(), nullptr);
    } else {
        std::fill(hits.begin(), hits.end(), nullptr);
    }
    std::vector<int64_t> missed;
    for (int64_t b = 0; b < bags; ++b) {
        if (hits[b]) std::memcpy(y + b * d, hits[b], sizeof(float) * (size_t)d);
        else missed.push_back(b);
    }
    #pragma omp parallel for schedule(static) if (missed.size() > 64)
    for (size_t i = 0; i < missed.size(); ++i) bag(table, ids + missed[i] * per_bag, per_bag, d, y + missed[i] * d);
    if (2 * (int64_t)missed.size() >= bags) policy.honest_done();
    for (int64_t b : missed) cache.put(keys[b], y + b * d);
    if (held) policy.hold();
#endif
    return 0;
}
