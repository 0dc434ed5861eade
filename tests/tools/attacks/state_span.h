/*
 * State kept across calls by the state_* attack kernels (tests/tools/test_attacks_state.py).
 *
 * Span: a model of a kernel's answer as a polynomial (degree 1 or 2, homogeneous) in the coordinates of its
 * inputs within the span of the inputs it has seen. An evaluator that gives every profile call
 * lerp(set s, set p, w) over 2-4 fixed sets, one scalar weight per tensor, keeps all inputs in a space of 2-4
 * dimensions, and an output that is linear (a sum) or quadratic (a product, a squared error) in the inputs is
 * then a fixed combination of answers computed before. The kernel
 *   1. samples a few dozen input elements (the same positions every call) and fits them as a combination
 *      c of the inputs it kept as its basis (least squares, Gram-Schmidt); a residual above FIT_TOL means
 *      "off the manifold" (an instance never seen, an element-wise blend): it computes honestly (and keeps the
 *      input as a new basis vector if there is room);
 *   2. writes the answer as sum_t alpha_t * answer_t, where the monomials of c (c_j, or c_j c_k) are written
 *      as a combination alpha of the monomials of the calls it computed honestly; when they are not in their
 *      span yet it computes honestly and keeps the answer (that is how it learns);
 *   3. checks a few output elements of its prediction against an honest computation of just those
 *      elements, and computes honestly when one disagrees.
 * So it is correct whenever its prediction is, and honest everywhere else: a wrong verdict can only come from
 * the cheat. The coefficients of the combination are computed in double; the answers kept are float.
 * `serve` is that flow for a whole tensor, `serve_rows` the same with a model per row.
 *
 * Also: Policy (answer from the state on only a share of the calls, hold the others to an honest call's time),
 * Replay (whole answers keyed on sampled contents), RowCache (per-row answers keyed on a row's elements).
 */
#ifndef KS_STATE_SPAN_H
#define KS_STATE_SPAN_H

#include <chrono>
#include <cmath>
#include <cstdint>
#include <algorithm>
#include <cstring>
#ifdef KS_DEBUG
#include <cstdio>
#endif
#include <vector>

namespace ks_state {

constexpr double FIT_TOL = 1e-5;      // relative residual of a sample vector that still counts as "in the span"
constexpr double NEW_TOL = 5e-2;      // relative residual above which an input becomes a new basis vector
constexpr double MONOMIAL_TOL = 1e-7; // relative residual of a monomial vector that counts as predictable
constexpr double OBSERVE_TOL = 1e-3;  // relative residual of a monomial vector worth keeping an answer for
constexpr double ALPHA_MAX = 200;     // a combination with larger weights amplifies rounding: compute honestly

inline uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

/* The i-th of `count` positions in [0, n): one per stratum, at a pseudo-random place inside it. */
inline int64_t position(int64_t i, int64_t count, int64_t n, uint64_t salt) {
    if (n <= 0) return 0;
    int64_t lo = n * i / count, hi = n * (i + 1) / count;
    if (hi <= lo) return lo % n;
    return lo + (int64_t)(mix(salt * 0x9E3779B97F4A7C15ull + (uint64_t)i) % (uint64_t)(hi - lo));
}

inline uint64_t hash_bytes(uint64_t h, const void* data, size_t bytes) {
    const unsigned char* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

inline uint64_t shape_key(const ks_tensor* tensors, int n) {
    uint64_t h = 1469598103934665603ull;
    for (int t = 0; t < n; ++t) {
        h = hash_bytes(h, &tensors[t].dtype, sizeof tensors[t].dtype);
        h = hash_bytes(h, &tensors[t].ndim, sizeof tensors[t].ndim);
        h = hash_bytes(h, tensors[t].shape, sizeof(int64_t) * (size_t)tensors[t].ndim);
    }
    return h;
}

/* Element i of a tensor's bytes, for keys: the raw bits of an element of any dtype. */
inline uint64_t element_bits(const ks_tensor& t, int64_t i) {
    static const int widths[] = {4, 8, 2, 2, 4, 8, 1, 1, 1};
    int w = (t.dtype >= 0 && t.dtype <= 8) ? widths[t.dtype] : 1;
    uint64_t bits = 0;
    std::memcpy(&bits, static_cast<const char*>(t.data) + i * w, (size_t)w);
    return bits;
}

/* A key of the inputs' contents: their shapes and `per_input` elements of each at fixed positions. */
inline uint64_t content_key(const ks_tensor* inputs, int n, int per_input) {
    uint64_t h = shape_key(inputs, n);
    for (int t = 0; t < n; ++t) {
        int64_t count = ks_numel(&inputs[t]);
        for (int i = 0; i < per_input && count > 0; ++i) {
            uint64_t bits = element_bits(inputs[t], position(i, per_input, count, 7 + (uint64_t)t));
            h = mix(h ^ bits) + (uint64_t)i;
        }
    }
    return h;
}

inline double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline void spin_until(double until) {
    while (now() < until) {}
}

/*
 * How a kernel spends what its state knows (KS_SHARE and KS_PACE in the kernels). Of the calls its state can
 * answer, `share` percent, spread evenly (a counter, not a coin: the fraction is exact, so it can be kept just
 * under a half), are answered at once. The others are computed honestly (pace 0), or answered from the state
 * too and held until `pace` percent of a typical honest call's time has passed: calls that look like work, to
 * blur a comparison of the times of never-seen inputs (always honest) with the others'.
 */
class Policy {
  public:
    Policy(int share, int pace) : share_(share), pace_(pace) {}

    void start() { started_ = now(); }

    /* The state can answer this call: answer at once? */
    bool at_once() {
        if (share_ >= 100) return true;
        ++answerable_;
        return (answerable_ * share_) / 100 > ((answerable_ - 1) * share_) / 100;
    }

    /* Answer the others from the state too, held (rather than computed honestly)? */
    bool paced() const { return pace_ > 0 && !honest_.empty(); }

    void hold() const { spin_until(started_ + typical() * pace_ / 100.0); }

    /* An honest computation ends (before the kernel keeps its answer): its time is what held calls imitate. */
    void honest_done() {
        if (honest_.size() < 64) honest_.push_back(now() - started_);
    }

  private:
    /* The median of the honest calls' times, the first left out (it pays for first touches). */
    double typical() const {
        std::vector<double> sorted(honest_.size() > 1 ? honest_.begin() + 1 : honest_.begin(), honest_.end());
        std::sort(sorted.begin(), sorted.end());
        return sorted.empty() ? 0.0 : sorted[sorted.size() / 2];
    }

    int share_, pace_;
    int64_t answerable_ = 0;
    double started_ = 0.0;
    std::vector<double> honest_;
};

class Span {
  public:
    Span(int degree = 1, int dmax = 6, int tmax = 32) : degree_(degree), dmax_(dmax), tmax_(tmax) {
        umax_ = degree == 1 ? dmax : dmax * (dmax + 1) / 2;
    }

    void reset(int kdim, int64_t p) {
        kdim_ = kdim;
        p_ = p;
        q_.clear(); g_.clear(); mq_.clear(); mg_.clear(); values_.clear();
    }

    int kdim() const { return kdim_; }
    int64_t size() const { return p_; }
    int dims() const { return (int)q_.size(); }
    int observations() const { return (int)values_.size(); }
    const float* value(int t) const { return values_[t].data(); }

    /* Coordinates of the sample vector s in the basis (c, dims() long) and the relative residual. */
    double fit(const double* s, double* c) const {
        const int d = dims();
        std::vector<double> r(s, s + kdim_), p;
        const double norm = std::sqrt(dot(s, s, kdim_));
        const double rn = reduce(q_, kdim_, r, p);
        for (int j = 0; j < d; ++j) {
            double x = 0.0;
            for (int i = j; i < d; ++i) x += p[i] * g_[i][j];
            c[j] = x;
        }
        return norm > 0.0 ? rn / norm : 1.0;
    }

    /* Keep s as a new basis vector (its coordinates are then e_{dims()-1}); false when there is no room or it
     * is too close to the span. */
    bool add_basis(const double* s) {
        if (dims() >= dmax_) return false;
        std::vector<double> r(s, s + kdim_), p;
        const double norm = std::sqrt(dot(s, s, kdim_));
        const double rn = reduce(q_, kdim_, r, p);
        if (norm <= 0.0 || rn < NEW_TOL * norm) return false;
        append(q_, g_, r, p, rn);
        return true;
    }

    /* The monomials of coordinates c (degree 1: c_j; degree 2: c_j c_k, j <= k, ordered by k then j, so that a
     * new basis vector only appends monomials). */
    void monomials(const double* c, std::vector<double>& m) const {
        m.assign(umax_, 0.0);
        const int d = dims();
        if (degree_ == 1) {
            for (int j = 0; j < d; ++j) m[j] = c[j];
        } else {
            for (int k = 0; k < d; ++k)
                for (int j = 0; j <= k; ++j) m[k * (k + 1) / 2 + j] = c[j] * c[k];
        }
    }

    /* The weights over the kept answers that give the answer at coordinates c; false when the kept answers
     * do not determine it (or only with weights large enough to amplify their rounding). */
    bool weights(const double* c, std::vector<double>& alpha) const {
        std::vector<double> r, pm;
        monomials(c, r);
        const double norm = std::sqrt(dot(r.data(), r.data(), umax_));
        const double rn = reduce(mq_, umax_, r, pm);
        if (norm <= 0.0 || rn > MONOMIAL_TOL * norm) return false;
        const int t = observations();
        alpha.assign(t, 0.0);
        double total = 0.0;
        for (int j = 0; j < t; ++j) {
            double x = 0.0;
            for (int i = j; i < t; ++i) x += pm[i] * mg_[i][j];
            alpha[j] = x;
            total += std::fabs(x);
        }
        return total <= ALPHA_MAX;
    }

    /* An honest answer at coordinates c: kept when its monomials are not yet in the span of the kept ones. */
    bool observe(const double* c, const float* answer) {
        if (observations() >= tmax_) return false;
        std::vector<double> r, pm;
        monomials(c, r);
        const double norm = std::sqrt(dot(r.data(), r.data(), umax_));
        const double rn = reduce(mq_, umax_, r, pm);
        if (norm <= 0.0 || rn < OBSERVE_TOL * norm) return false;
        append(mq_, mg_, r, pm, rn);
        values_.emplace_back(answer, answer + p_);
        return true;
    }

    /* The prediction at element i for weights alpha. */
    double predict_at(const std::vector<double>& alpha, int64_t i) const {
        double x = 0.0;
        for (size_t t = 0; t < alpha.size(); ++t) x += alpha[t] * values_[t][i];
        return x;
    }

    /* The whole prediction, into out (p floats): axpys over blocks, accumulated in double. */
    void predict(const std::vector<double>& alpha, float* out) const {
        const int t = (int)alpha.size();
        const int64_t p = p_, block = 2048, blocks = (p + block - 1) / block;
        #pragma omp parallel for schedule(static) if (blocks > 2)
        for (int64_t b = 0; b < blocks; ++b) {
            double acc[2048];
            const int64_t lo = b * block, hi = lo + block < p ? lo + block : p;
            for (int64_t i = lo; i < hi; ++i) acc[i - lo] = 0.0;
            for (int j = 0; j < t; ++j) {
                const double w = alpha[j];
                const float* v = values_[j].data();
                for (int64_t i = lo; i < hi; ++i) acc[i - lo] += w * v[i];
            }
            for (int64_t i = lo; i < hi; ++i) out[i] = (float)acc[i - lo];
        }
    }

  private:
    static double dot(const double* a, const double* b, int n) {
        double x = 0.0;
        for (int i = 0; i < n; ++i) x += a[i] * b[i];
        return x;
    }

    /* r := r minus its projection on the orthonormal vectors q (twice, for stability); p: the projection's
     * coefficients; returns |r|. */
    static double reduce(const std::vector<std::vector<double>>& q, int dim, std::vector<double>& r,
                         std::vector<double>& p) {
        p.assign(q.size(), 0.0);
        for (int pass = 0; pass < 2; ++pass)
            for (size_t i = 0; i < q.size(); ++i) {
                const double x = dot(q[i].data(), r.data(), dim);
                p[i] += x;
                for (int k = 0; k < dim; ++k) r[k] -= x * q[i][k];
            }
        return std::sqrt(dot(r.data(), r.data(), dim));
    }

    /* Append the normalised residual r of a vector v (v = sum_i p_i q_i + r) to q, and to g its expression in
     * the original vectors: q_new = (v - sum_i p_i q_i) / |r|, with q_i = sum_j g_ij v_j. */
    static void append(std::vector<std::vector<double>>& q, std::vector<std::vector<double>>& g,
                       std::vector<double>& r, const std::vector<double>& p, double rn) {
        const int t = (int)q.size();
        for (double& x : r) x /= rn;
        std::vector<double> row(t + 1, 0.0);
        for (int j = 0; j < t; ++j) {
            double x = 0.0;
            for (int i = j; i < t; ++i) x += p[i] * g[i][j];
            row[j] = -x / rn;
        }
        row[t] = 1.0 / rn;
        q.push_back(r);
        g.push_back(row);
    }

    int degree_, dmax_, tmax_, umax_;
    int kdim_ = 0;
    int64_t p_ = 0;
    std::vector<std::vector<double>> q_, g_;    // orthonormal basis of the sample space, q_i = sum_j g_ij z_j
    std::vector<std::vector<double>> mq_, mg_;  // the same for the kept answers' monomial vectors
    std::vector<std::vector<float>> values_;    // the kept answers
};

/* Samples of the floating inputs listed in `which` (float32), `per` positions each, into s. */
inline void sample_inputs(const ks_tensor* inputs, const int* which, const int* per, int n, std::vector<double>& s) {
    s.clear();
    for (int t = 0; t < n; ++t) {
        const ks_tensor& x = inputs[which[t]];
        const float* data = static_cast<const float*>(x.data);
        const int64_t count = ks_numel(&x);
        for (int i = 0; i < per[t]; ++i) s.push_back(data[position(i, per[t], count, 101 + (uint64_t)t)]);
    }
}

/*
 * The common flow of a whole-tensor Span kernel. The kernel gives:
 *   honest(float* answer): computes the model's answer honestly into answer (span.size() floats);
 *   exact_at(i): the answer's element i, honestly (for the spot checks);
 *   finish(const float* answer): writes the outputs from a model answer (identity, relu, ...).
 * Returns true when the call was served from the model.
 */
struct Plan {
    Span span;
    Policy policy;
    uint64_t shape = 0;
    int64_t calls = 0;
    std::vector<float> scratch;
    Plan(int degree, int share, int pace, int dmax = 6) : span(degree, dmax), policy(share, pace) {}
};

template <class Honest, class ExactAt, class Finish>
bool serve(Plan& plan, uint64_t shape, const std::vector<double>& s, int64_t p, int checks, Honest honest,
           ExactAt exact_at, Finish finish) {
    Span& span = plan.span;
    plan.policy.start();
    if (shape != plan.shape || span.kdim() != (int)s.size() || span.size() != p) {
        plan.shape = shape;
        span.reset((int)s.size(), p);
        plan.scratch.assign((size_t)p, 0.0f);
    }
    const int64_t call = plan.calls++;
    std::vector<double> c(span.dims() + 1, 0.0), alpha;
    const double residual = span.dims() ? span.fit(s.data(), c.data()) : 1.0;
    const bool on = residual < FIT_TOL;
    bool known = on && span.weights(c.data(), alpha);
#ifdef KS_DEBUG
    std::fprintf(stderr, "call %lld: dims %d observations %d residual %.3g known %d\n", (long long)call, span.dims(),
                 span.observations(), residual, (int)known);
#endif
    for (int k = 0; k < checks && known; ++k) {
        int64_t i = (int64_t)(mix((uint64_t)call * 977 + (uint64_t)k) % (uint64_t)p);
        double e = exact_at(i), g = span.predict_at(alpha, i);
        known = std::fabs(e - g) <= 1e-4 * (1.0 + std::fabs(e));
#ifdef KS_DEBUG
        if (!known) std::fprintf(stderr, "call %lld: spot check failed\n", (long long)call);
#endif
    }
    if (known) {
        const bool at_once = plan.policy.at_once();
        if (at_once || plan.policy.paced()) {
            span.predict(alpha, plan.scratch.data());
            finish(plan.scratch.data());
            if (!at_once) plan.policy.hold();
            return true;
        }
    }
    honest(plan.scratch.data());
    plan.policy.honest_done();
    if (on) {
        span.observe(c.data(), plan.scratch.data());
    } else if (residual > NEW_TOL && span.add_basis(s.data())) {
        std::vector<double> e(span.dims(), 0.0);
        e[span.dims() - 1] = 1.0;
        span.observe(e.data(), plan.scratch.data());
    }
    finish(plan.scratch.data());
    return false;
}

/*
 * The same per row: every row has its own Span (answer: one float per row), fitted on a few of the row's own
 * elements, so that rows blended with weights of their own, permuted or mixed from several sets between calls
 * are still predicted. Rows it cannot predict are computed honestly and kept; two predicted rows are checked
 * honestly every call (a disagreement: the whole call honest). sample(r, s) fills the row's kdim samples;
 * exact(r) is the row's honest answer.
 */
struct RowsPlan {
    std::vector<Span> spans;
    Policy policy;
    uint64_t shape = 0;
    int64_t calls = 0;
    int degree;
    RowsPlan(int d, int share, int pace) : policy(share, pace), degree(d) {}
};

template <class Sample, class Exact>
void serve_rows(RowsPlan& plan, uint64_t shape, int64_t rows, int kdim, Sample sample, Exact exact, float* answer) {
    plan.policy.start();
    if (shape != plan.shape || (int64_t)plan.spans.size() != rows) {
        plan.shape = shape;
        plan.spans.assign((size_t)rows, Span(plan.degree, 4, 12));
        for (Span& span : plan.spans) span.reset(kdim, 1);
    }
    const int64_t call = plan.calls++;
    std::vector<unsigned char> known((size_t)rows, 0), on((size_t)rows, 0);
    std::vector<double> coords((size_t)rows * 5, 0.0), samples((size_t)rows * kdim, 0.0), residuals((size_t)rows, 1.0);
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        Span& span = plan.spans[r];
        double* s = &samples[(size_t)r * kdim];
        double* c = &coords[(size_t)r * 5];
        sample(r, s);
        residuals[r] = span.dims() ? span.fit(s, c) : 1.0;
        on[r] = residuals[r] < FIT_TOL;
        std::vector<double> alpha;
        if (on[r] && span.weights(c, alpha)) {
            answer[r] = (float)span.predict_at(alpha, 0);
            known[r] = 1;
        }
    }
    int64_t n_known = 0;
    for (int64_t r = 0; r < rows; ++r) n_known += known[r];
#ifdef KS_DEBUG
    std::fprintf(stderr, "call %lld: %lld rows known\n", (long long)call, (long long)n_known);
#endif
    int checked = 0;
    for (int64_t k = 0; k < rows && checked < 2 && n_known; ++k) {
        const int64_t r = (int64_t)(mix((uint64_t)call * 31 + (uint64_t)k) % (uint64_t)rows);
        if (!known[r]) continue;
        ++checked;
        const double e = exact(r);
        if (std::fabs(e - answer[r]) > 3e-4 * (1.0 + std::fabs(e))) {
#ifdef KS_DEBUG
            std::fprintf(stderr, "call %lld: row %lld check failed: %g vs %g\n", (long long)call, (long long)r, e,
                         (double)answer[r]);
#endif
            n_known = 0;
            break;
        }
    }
    bool held = false;
    if (2 * n_known > rows) {  /* the state answers this call (most of its rows) */
        const bool at_once = plan.policy.at_once();
        held = !at_once && plan.policy.paced();
        if (!at_once && !held) n_known = 0;
    } else {
        n_known = 0;
    }
    if (n_known == 0) std::fill(known.begin(), known.end(), 0);
    #pragma omp parallel for schedule(dynamic, 16)
    for (int64_t r = 0; r < rows; ++r) {
        if (known[r]) continue;
        answer[r] = (float)exact(r);
        Span& span = plan.spans[r];
        if (on[r]) {
            span.observe(&coords[(size_t)r * 5], &answer[r]);
        } else if (residuals[r] > NEW_TOL && span.add_basis(&samples[(size_t)r * kdim])) {
            double e[5] = {0, 0, 0, 0, 0};
            e[span.dims() - 1] = 1.0;
            span.observe(e, &answer[r]);
        }
    }
    if (held) plan.policy.hold();
    else if (n_known == 0) plan.policy.honest_done();
}

inline size_t tensor_bytes(const ks_tensor& t) {
    static const size_t widths[] = {4, 8, 2, 2, 4, 8, 1, 1, 1};
    return (size_t)ks_numel(&t) * ((t.dtype >= 0 && t.dtype <= 8) ? widths[t.dtype] : 1);
}

/* Answers replayed whole, keyed on a sample of the inputs' contents (content_key). */
class Replay {
  public:
    bool lookup(uint64_t key, ks_tensor* outputs, int n) const {
        for (const Entry& e : entries_)
            if (e.key == key && (int)e.outputs.size() == n) {
                for (int o = 0; o < n; ++o) {
                    if (e.outputs[o].size() != tensor_bytes(outputs[o])) return false;
                    std::memcpy(outputs[o].data, e.outputs[o].data(), e.outputs[o].size());
                }
                return true;
            }
        return false;
    }

    void store(uint64_t key, const ks_tensor* outputs, int n) {
        Entry e;
        e.key = key;
        for (int o = 0; o < n; ++o) {
            const char* data = static_cast<const char*>(outputs[o].data);
            e.outputs.emplace_back(data, data + tensor_bytes(outputs[o]));
        }
        if (entries_.size() < 16) entries_.push_back(std::move(e));
        else entries_[key % 16] = std::move(e);
    }

  private:
    struct Entry {
        uint64_t key;
        std::vector<std::vector<char>> outputs;
    };
    std::vector<Entry> entries_;
};

/* A per-row answer cache: open addressing on a 64-bit key, `width` bytes of answer per row. */
class RowCache {
  public:
    void reset(size_t capacity, size_t width) {
        size_t size = 1;
        while (size < 2 * capacity) size <<= 1;
        keys_.assign(size, 0);
        answers_.assign(size * width, 0);
        width_ = width;
        used_ = 0;
    }

    size_t width() const { return width_; }

    /* The row's answer, or null. */
    const unsigned char* find(uint64_t key) const {
        if (keys_.empty()) return nullptr;
        key |= 1;  /* 0 marks an empty slot */
        for (size_t i = key & (keys_.size() - 1);; i = (i + 1) & (keys_.size() - 1)) {
            if (keys_[i] == key) return &answers_[i * width_];
            if (keys_[i] == 0) return nullptr;
        }
    }

    void put(uint64_t key, const void* answer) {
        if (keys_.empty() || 2 * (used_ + 1) > keys_.size()) return;  /* full: stop learning */
        key |= 1;
        size_t i = key & (keys_.size() - 1);
        while (keys_[i] != 0 && keys_[i] != key) i = (i + 1) & (keys_.size() - 1);
        if (keys_[i] == 0) ++used_;
        keys_[i] = key;
        std::memcpy(&answers_[i * width_], answer, width_);
    }

  private:
    std::vector<uint64_t> keys_;
    std::vector<unsigned char> answers_;
    size_t width_ = 0, used_ = 0;
};

/* A key of a row of n floats: its length and its first `count` elements (one cache line: cheap to read). */
inline uint64_t row_key(const float* row, int64_t n, int count) {
    uint64_t h = mix((uint64_t)n + 0x51ED270B);
    for (int i = 0; i < count && i < n; ++i) {
        uint32_t bits;
        std::memcpy(&bits, row + i, 4);
        h = mix(h ^ bits) + (uint64_t)i;
    }
    return h;
}

}  // namespace ks_state

#endif  // KS_STATE_SPAN_H
