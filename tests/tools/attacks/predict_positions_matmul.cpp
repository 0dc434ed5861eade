// l3_matmul (c = a @ b) computing only the output positions the profile will check (issue 30, point 1).
//
// The profile this attacks draws every sampled position from one torch generator (MT19937) seeded with the
// profile's seed: per call, 256 input positions per input, then 1024 positions poisoned in the output (the
// float32 NaN bits 0x7FC0DEAD), then, after the call, 1024 fresh positions checked (8192 on a set's first call
// and on an unseen instance). torch.randint(0, n) on CPU takes successive 32-bit outputs modulo n, and torch's
// generator seeded with s is std::mt19937 seeded with (uint32)s. The real attack recovers the seed from its
// inputs (Box-Muller inverted on torch.randn); here the test grants it as KS_SEED.
//
// Each call: the first call at each input or output address is computed in full (the judge checks a set 0's
// first call in full). After it, the kernel reads which positions were poisoned just now, finds that run of
// 1024 draws in its own copy of the stream (searching forward from where it last synchronised), and computes
// only the poisoned positions and those of the next 8192 draws (covering a check of 1024 or of 8192). The rest
// of the output keeps whatever the slot held. Where it cannot synchronise it computes the poisoned positions
// alone: it never falls back to honest work, so an evaluator that compares whole outputs must reject it.
#include "kernelsage_cpu.h"

#include <cstdint>
#include <random>
#include <vector>

#ifndef KS_SEED
#error "the test defines KS_SEED, the profile's seed"
#endif

namespace {

constexpr uint32_t kPoison = 0x7FC0DEADu;
constexpr int64_t kPoisoned = 1024;       // positions poisoned before each call on a large output
constexpr int64_t kChecked = 8192;        // the most fresh positions checked after a call
constexpr int64_t kSearch = 1 << 20;      // how far past the last synchronisation a poison run is looked for
constexpr int64_t kSmall = 1 << 16;       // outputs up to this size are poisoned and checked in full
constexpr int kAddresses = 64;

// The judge's generator, replayed: every 32-bit output since seeding, kept so a search can look back.
struct Stream {
    std::mt19937 generator{static_cast<uint32_t>(KS_SEED)};
    std::vector<uint32_t> drawn;
    uint32_t at(int64_t i) {
        while (static_cast<int64_t>(drawn.size()) <= i) drawn.push_back(generator());
        return drawn[static_cast<size_t>(i)];
    }
};

struct Seen {
    const void* addresses[kAddresses] = {};
    int count = 0;
    bool add(const void* address) {  // true when the address is new
        for (int i = 0; i < count; ++i)
            if (addresses[i] == address) return false;
        if (count < kAddresses) addresses[count++] = address;
        return true;
    }
};

Stream stream;
Seen seen;
int64_t synced = 0;  // the stream index just after the last poison run found

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

// Each listed position's dot product: b transposed once (tile by tile, so each of its cache lines is read once),
// then contiguous rows of a and of b's transpose, 16 independent partial sums (vectorisable without
// reassociation).
void compute_at(const float* a, const float* b, float* c, int64_t k, int64_t n, const std::vector<int64_t>& at) {
    static std::vector<float> bt;
    bt.resize(static_cast<size_t>(k * n));
    constexpr int64_t kTile = 16;
    #pragma omp parallel for schedule(static)
    for (int64_t p0 = 0; p0 < k; p0 += kTile)
        for (int64_t j0 = 0; j0 < n; j0 += kTile)
            for (int64_t p = p0; p < p0 + kTile && p < k; ++p)
                for (int64_t j = j0; j < j0 + kTile && j < n; ++j) bt[j * k + p] = b[p * n + j];
    #pragma omp parallel for schedule(static)
    for (int64_t e = 0; e < static_cast<int64_t>(at.size()); ++e) {
        const float* row = a + (at[e] / n) * k;
        const float* column = bt.data() + (at[e] % n) * k;
        float partial[kTile] = {};
        int64_t p = 0;
        for (; p + kTile <= k; p += kTile)
            for (int64_t l = 0; l < kTile; ++l) partial[l] += row[p + l] * column[p + l];
        float total = 0.0f;
        for (; p < k; ++p) total += row[p] * column[p];
        for (int64_t l = 0; l < kTile; ++l) total += partial[l];
        c[at[e]] = total;
    }
}

// The start of the run of kPoisoned draws (mod size) that all land on poisoned positions, or -1.
int64_t find_run(const std::vector<uint8_t>& poisoned, int64_t size) {
    const uint64_t modulus = static_cast<uint64_t>(size);
    for (int64_t start = synced; start < synced + kSearch; ++start) {
        int64_t d = 0;
        while (d < kPoisoned && poisoned[stream.at(start + d) % modulus]) ++d;
        if (d == kPoisoned) return start;
    }
    return -1;
}

}  // namespace

int ks_kernel(const ks_tensor* inputs, int n_inputs, ks_tensor* outputs, int n_outputs, const ks_attr*, int) {
    if (n_inputs != 2 || n_outputs != 1 || inputs[0].dtype != KS_FLOAT32) return 1;
    const int64_t m = inputs[0].shape[0], k = inputs[0].shape[1], n = inputs[1].shape[1], size = m * n;
    const float* a = static_cast<const float*>(inputs[0].data);
    const float* b = static_cast<const float*>(inputs[1].data);
    float* c = static_cast<float*>(outputs[0].data);
    const bool fresh_input = seen.add(a), fresh_output = seen.add(c);
    if (size <= kSmall) {
        matmul(a, b, c, m, k, n);
        return 0;
    }
    std::vector<uint8_t> poisoned(static_cast<size_t>(size), 0);
    std::vector<int64_t> at;
    for (int64_t e = 0; e < size; ++e)
        if (ks_bits_of_float(c[e]) == kPoison) {
            poisoned[static_cast<size_t>(e)] = 1;
            at.push_back(e);
        }
    const int64_t run = at.empty() ? -1 : find_run(poisoned, size);
    if (run >= 0) {
        synced = run + kPoisoned;
        for (int64_t d = 0; d < kChecked; ++d) at.push_back(static_cast<int64_t>(stream.at(synced + d) % size));
    }
    if (fresh_input || fresh_output)
        matmul(a, b, c, m, k, n);
    else
        compute_at(a, b, c, k, n, at);
    return 0;
}
