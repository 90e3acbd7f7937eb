/* Token sampling: logit biases, penalties, top-k, top-p, min-p, temperature, then a seeded draw.
 * The order and the semantics of each step follow llama.cpp's default sampler chain (common/sampling:
 * penalties, top_k, top_p, min_p, temp, dist); the random numbers are our own (xoshiro256**), so a
 * seed reproduces our runs, not llama.cpp's. Ties are broken by the lower token id everywhere. */
#include "moerun.h"
#include "base/base.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- RNG: xoshiro256** (Blackman & Vigna), state from splitmix64 ---- */
static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void mr_rng_seed(mr_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t mr_rng_next(mr_rng *r) {
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

double mr_rng_uniform(mr_rng *r) { return (double)(mr_rng_next(r) >> 11) * 0x1.0p-53; }

/* ---- sampler ---- */
struct mr_sampler {
    mr_sampler_params p;
    int32_t n_vocab;
    mr_rng rng;
    int32_t *hist;      /* ring buffer of the last repeat_last_n accepted tokens */
    int32_t hist_n, hist_pos;
    uint8_t *seen;      /* n_vocab flags, scratch for the penalty */
    struct cand { float logit; int32_t id; } *c; /* n_vocab candidates, scratch */
    double *prob;
    /* presence / frequency penalties: how often each token was generated in this reply, and the
     * distinct ones (so a step costs O(distinct tokens), not O(n_vocab)); NULL when both are 0 */
    int32_t *count, *counted;
    int32_t n_counted;
    /* logit biases, sorted by id */
    int32_t *bias_ids;
    float *bias_vals;
    int32_t n_bias;
};

void mr_sampler_default_params(mr_sampler_params *p) {
    p->temperature = 0.8f;
    p->top_k = 40;
    p->top_p = 0.95f;
    p->min_p = 0.05f;
    p->repeat_penalty = 1.0f;
    p->repeat_last_n = 64;
    p->seed = 0x5eed;
    p->presence_penalty = 0.0f;
    p->frequency_penalty = 0.0f;
    p->bias_ids = NULL;
    p->bias_vals = NULL;
    p->n_bias = 0;
}

void mr_sampler_free(mr_sampler *s) {
    if (!s) return;
    free(s->hist); free(s->seen); free(s->c); free(s->prob);
    free(s->count); free(s->counted); free(s->bias_ids); free(s->bias_vals);
    free(s);
}

static int cmp_bias(const void *x, const void *y) {
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return a < b ? -1 : a > b;
}

/* A sorted copy of p's logit biases: ids checked against the vocabulary and for repeats, values
 * clamped; -1 with the error set (the allocation failure leaves s->bias_ids NULL). */
static int set_bias(mr_sampler *s, const mr_sampler_params *p) {
    const int32_t n = p->n_bias;
    if (n <= 0) return 0;
    if (!p->bias_ids || !p->bias_vals || n > s->n_vocab) { mr_set_error("sampler: %d logit biases for a vocabulary of %d", n, s->n_vocab); return -1; }
    /* (id, index) pairs sorted by id: repeats become neighbours */
    int32_t *pairs = mr_malloc(sizeof *pairs * 2 * (size_t)n);
    s->bias_ids = mr_malloc(sizeof *s->bias_ids * (size_t)n);
    s->bias_vals = mr_malloc(sizeof *s->bias_vals * (size_t)n);
    if (!pairs || !s->bias_ids || !s->bias_vals) {
        free(pairs); free(s->bias_ids); free(s->bias_vals);
        s->bias_ids = NULL; s->bias_vals = NULL;
        mr_set_error("sampler: out of memory");
        return -1;
    }
    for (int32_t i = 0; i < n; i++) { pairs[2 * i] = p->bias_ids[i]; pairs[2 * i + 1] = i; }
    qsort(pairs, (size_t)n, 2 * sizeof *pairs, cmp_bias);
    for (int32_t i = 0; i < n; i++) {
        const int32_t id = pairs[2 * i];
        const float v = p->bias_vals[pairs[2 * i + 1]];
        if (id < 0 || id >= s->n_vocab) { mr_set_error("sampler: logit bias for token %d, outside the vocabulary (%d)", id, s->n_vocab); break; }
        if (i && id == pairs[2 * i - 2]) { mr_set_error("sampler: logit bias for token %d given twice", id); break; }
        if (isnan(v)) { mr_set_error("sampler: logit bias for token %d is not a number", id); break; }
        s->bias_ids[i] = id;
        s->bias_vals[i] = v <= -MR_SAMPLER_BIAS_MAX ? -INFINITY : v > MR_SAMPLER_BIAS_MAX ? MR_SAMPLER_BIAS_MAX : v;
        s->n_bias = i + 1;
    }
    free(pairs);
    return s->n_bias == n ? 0 : -1;
}

mr_sampler *mr_sampler_new(const mr_sampler_params *p, int32_t n_vocab) {
    if (n_vocab <= 0) { mr_set_error("sampler: bad vocabulary size %d", n_vocab); return NULL; }
    mr_sampler *s = mr_calloc(1, sizeof *s);
    if (!s) { mr_set_error("sampler: out of memory"); return NULL; }
    if (p) s->p = *p; else mr_sampler_default_params(&s->p);
    if (s->p.repeat_last_n < 0) s->p.repeat_last_n = 0;
    if (s->p.repeat_last_n > MR_SAMPLER_MAX_LAST_N) { /* its ring buffer is allocated here */
        mr_set_error("sampler: repeat_last_n %d above %d", s->p.repeat_last_n, MR_SAMPLER_MAX_LAST_N);
        free(s);
        return NULL;
    }
    if (!(s->p.repeat_penalty > 0)) s->p.repeat_penalty = 1.0f; /* also NaN */
    if (!isfinite(s->p.presence_penalty) || !isfinite(s->p.frequency_penalty)) {
        mr_set_error("sampler: presence / frequency penalty %g / %g is not a number", s->p.presence_penalty, s->p.frequency_penalty);
        free(s);
        return NULL;
    }
    s->n_vocab = n_vocab;
    int bad = set_bias(s, &s->p);
    s->p.bias_ids = NULL; /* the caller's arrays are not kept */
    s->p.bias_vals = NULL;
    if (bad) { mr_sampler_free(s); return NULL; }
    if (s->p.presence_penalty != 0 || s->p.frequency_penalty != 0) {
        s->count = mr_calloc((size_t)n_vocab, sizeof *s->count);
        s->counted = mr_malloc(sizeof *s->counted * (size_t)n_vocab);
        if (!s->count || !s->counted) { mr_sampler_free(s); mr_set_error("sampler: out of memory"); return NULL; }
    }
    s->hist = mr_malloc(sizeof *s->hist * (size_t)(s->p.repeat_last_n + 1));
    s->seen = mr_calloc((size_t)n_vocab, 1);
    s->c = mr_malloc(sizeof *s->c * (size_t)n_vocab);
    s->prob = mr_malloc(sizeof *s->prob * (size_t)n_vocab);
    if (!s->hist || !s->seen || !s->c || !s->prob) { mr_sampler_free(s); mr_set_error("sampler: out of memory"); return NULL; }
    mr_sampler_reset(s);
    return s;
}

void mr_sampler_begin_reply(mr_sampler *s) {
    if (!s->count) return;
    for (int32_t i = 0; i < s->n_counted; i++) s->count[s->counted[i]] = 0;
    s->n_counted = 0;
}

void mr_sampler_reset(mr_sampler *s) {
    s->hist_n = s->hist_pos = 0;
    mr_sampler_begin_reply(s);
    mr_rng_seed(&s->rng, s->p.seed);
}

void mr_sampler_accept(mr_sampler *s, int32_t id) {
    if (s->count && id >= 0 && id < s->n_vocab && s->count[id]++ == 0) s->counted[s->n_counted++] = id;
    int32_t n = s->p.repeat_last_n;
    if (n <= 0) return;
    s->hist[s->hist_pos] = id;
    s->hist_pos = (s->hist_pos + 1) % n;
    if (s->hist_n < n) s->hist_n++;
}

/* higher logit first, then lower id */
static int cand_before(const struct cand *a, const struct cand *b) {
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}
static int cmp_cand(const void *x, const void *y) {
    const struct cand *a = x, *b = y;
    return cand_before(a, b) ? -1 : cand_before(b, a) ? 1 : 0;
}

/* Keep the k best candidates at the front, sorted (min-heap selection, then sort). */
static void select_top_k(struct cand *c, int32_t n, int32_t k) {
    /* heap of the k best seen so far, worst at the root */
    for (int32_t i = 0; i < n; i++) {
        struct cand x = c[i];
        int32_t pos;
        if (i < k) {
            pos = i;
            while (pos > 0) { /* sift up: a worse element moves towards the root */
                int32_t par = (pos - 1) / 2;
                if (!cand_before(&c[par], &x)) break;
                c[pos] = c[par];
                pos = par;
            }
            c[pos] = x;
        } else if (cand_before(&x, &c[0])) {
            pos = 0;
            for (;;) {
                int32_t ch = 2 * pos + 1;
                if (ch >= k) break;
                if (ch + 1 < k && cand_before(&c[ch], &c[ch + 1])) ch++; /* the worse child */
                if (!cand_before(&x, &c[ch])) break;
                c[pos] = c[ch];
                pos = ch;
            }
            c[pos] = x;
        }
    }
    qsort(c, (size_t)k, sizeof *c, cmp_cand);
}

/* softmax of the first n (sorted, so c[0] is the max) into prob; returns the sum of exps */
static double softmax(const struct cand *c, int32_t n, double *prob) {
    double sum = 0;
    for (int32_t i = 0; i < n; i++) { prob[i] = exp((double)c[i].logit - (double)c[0].logit); sum += prob[i]; }
    return sum;
}

/* The sampling distribution of the chain: candidates c[0..*m) with unnormalised probabilities
 * prob[0..*m) (their sum in *sum). Returns -1 then; or, when the chain ends in one certain token
 * (greedy, or nothing possible), that token id. */
static int32_t chain(mr_sampler *s, const float *logits, int32_t *m_out, double *sum_out) {
    const mr_sampler_params *p = &s->p;
    int32_t n = s->n_vocab;
    struct cand *c = s->c;
    for (int32_t i = 0; i < n; i++) {
        float l = logits[i];
        c[i].logit = isnan(l) ? -INFINITY : l;
        c[i].id = i;
    }
    for (int32_t i = 0; i < s->n_bias; i++) c[s->bias_ids[i]].logit += s->bias_vals[i];
    /* repetition penalty, once per distinct recent token */
    if (p->repeat_penalty != 1.0f && s->hist_n > 0) {
        for (int32_t i = 0; i < s->hist_n; i++) {
            int32_t id = s->hist[i];
            if (id < 0 || id >= n || s->seen[id]) continue;
            s->seen[id] = 1;
            if (c[id].logit <= 0) c[id].logit *= p->repeat_penalty;
            else c[id].logit /= p->repeat_penalty;
        }
        for (int32_t i = 0; i < s->hist_n; i++) if (s->hist[i] >= 0 && s->hist[i] < n) s->seen[s->hist[i]] = 0;
    }
    /* presence and frequency penalties over this reply's tokens */
    for (int32_t i = 0; i < s->n_counted; i++) {
        const int32_t id = s->counted[i];
        c[id].logit -= p->presence_penalty + (float)s->count[id] * p->frequency_penalty;
    }
    if (!(p->temperature > 0)) {
        int32_t best = 0;
        for (int32_t i = 1; i < n; i++) if (c[i].logit > c[best].logit) best = i;
        return best;
    }
    /* top-k (sorts the survivors); without it, sort everything for top-p / min-p */
    int32_t m = n;
    if (p->top_k > 0 && p->top_k < n) {
        m = p->top_k;
        select_top_k(c, n, m);
    } else {
        qsort(c, (size_t)n, sizeof *c, cmp_cand);
    }
    if (c[0].logit == -INFINITY) return c[0].id; /* nothing is possible; lowest id */
    /* top-p: the smallest prefix whose probability reaches p (at temperature 1, as llama.cpp) */
    if (p->top_p < 1.0f) {
        double sum = softmax(c, m, s->prob), cum = 0;
        int32_t keep = m;
        for (int32_t i = 0; i < m; i++) {
            cum += s->prob[i] / sum;
            if (cum >= (double)p->top_p) { keep = i + 1; break; }
        }
        m = keep;
    }
    /* min-p: drop tokens less likely than min_p times the best one */
    if (p->min_p > 0.0f) {
        double thr = (double)c[0].logit + log((double)p->min_p);
        int32_t keep = 1;
        while (keep < m && (double)c[keep].logit >= thr) keep++;
        m = keep;
    }
    /* temperature */
    for (int32_t i = 0; i < m; i++) c[i].logit /= p->temperature;
    *sum_out = softmax(c, m, s->prob);
    *m_out = m;
    return -1;
}

/* Draw from candidates 0..m) by prob, skipping index skip (-1: none); total = their sum. */
static int32_t draw(mr_sampler *s, int32_t m, int32_t skip, double total) {
    const struct cand *c = s->c;
    double u = mr_rng_uniform(&s->rng) * total, cum = 0;
    int32_t last = -1;
    for (int32_t i = 0; i < m; i++) {
        if (i == skip) continue;
        cum += s->prob[i];
        if (s->prob[i] > 0) last = i; /* rounding may leave u >= cum: the last possible one, never a banned one */
        if (u < cum) return c[i].id;
    }
    return c[last < 0 ? 0 : last].id;
}

int32_t mr_sampler_sample(mr_sampler *s, const float *logits) {
    int32_t m;
    double sum;
    int32_t id = chain(s, logits, &m, &sum);
    return id >= 0 ? id : draw(s, m, -1, sum);
}

/* Speculative sampling with a deterministic draft (the draft distribution q is a point mass on
 * `draft`): accept it with probability p(draft); otherwise draw from max(p - q, 0) renormalised,
 * which is p without the draft. The token returned is distributed exactly as mr_sampler_sample's
 * (Leviathan et al. 2023, Chen et al. 2023). Greedy: the argmax, accepted when it is the draft. */
int32_t mr_sampler_verify(mr_sampler *s, const float *logits, int32_t draft, int *accepted) {
    int32_t m;
    double sum;
    int32_t id = chain(s, logits, &m, &sum);
    if (id >= 0) { *accepted = id == draft; return id; }
    int32_t at = -1;
    for (int32_t i = 0; i < m; i++) if (s->c[i].id == draft) { at = i; break; }
    if (at >= 0 && mr_rng_uniform(&s->rng) * sum < s->prob[at]) { *accepted = 1; return draft; }
    *accepted = 0;
    if (at >= 0 && m == 1) return draft; /* p(draft) = 1: unreachable (u < 1), kept for safety */
    return draw(s, m, at, at >= 0 ? sum - s->prob[at] : sum);
}
