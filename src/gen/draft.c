/* Draft sources for speculative decoding. Both only propose: every draft is verified by the main
 * model, so a bad draft costs time, never correctness. */
#include "gen/draft.h"
#include "base/base.h"

#include <stdlib.h>
#include <string.h>

int mr_draft_ngram(const int32_t *hist, int n_hist, int nmax, int nmin, int kmax, int32_t *out) {
    if (nmax > n_hist - 1) nmax = n_hist - 1;
    for (int len = nmax; len >= nmin && len >= 1; len--) {
        const int32_t *key = hist + n_hist - len;
        /* the most recent earlier match: recent text predicts the continuation best */
        for (int i = n_hist - len - 1; i >= 0; i--) {
            if (hist[i] != key[0] || memcmp(hist + i, key, sizeof(int32_t) * (size_t)len)) continue;
            int c = n_hist - (i + len);
            if (c > kmax) c = kmax;
            memcpy(out, hist + i + len, sizeof(int32_t) * (size_t)c);
            return c;
        }
    }
    return 0;
}

static int32_t argmax(const float *l, int n) {
    int32_t b = 0;
    for (int32_t i = 1; i < n; i++) if (l[i] > l[b]) b = i;
    return b;
}

int mr_draft_model(mr_session *d, const int32_t *hist, int n_hist, int *d_past, int n_batch, int kmax, int32_t *out) {
    if (n_hist <= 0) return 0;
    const int n_ctx = mr_session_n_ctx(d);
    if (n_hist + kmax > n_ctx) kmax = n_ctx - n_hist;
    if (kmax <= 0) return 0;
    const int nv = mr_model_n_vocab(mr_session_model(d));
    float *l = mr_malloc(sizeof(float) * (size_t)nv);
    if (!l) { mr_set_error("draft: out of memory"); return -1; }
    int from = *d_past < n_hist ? *d_past : n_hist - 1;
    int k = 0;
    if (mr_session_n_past(d) != from && mr_session_truncate(d, from)) goto fail;
    while (from < n_hist) {
        int c = n_hist - from < n_batch ? n_hist - from : n_batch;
        if (mr_session_eval(d, hist + from, c, l, 0)) goto fail;
        from += c;
    }
    for (; k < kmax; k++) {
        out[k] = argmax(l, nv);
        if (k + 1 < kmax && mr_session_eval(d, &out[k], 1, l, 0)) goto fail;
    }
    if (mr_session_truncate(d, n_hist - 1)) goto fail;
    *d_past = n_hist - 1;
    free(l);
    return k;
fail:
    free(l);
    mr_session_reset(d);
    *d_past = 0;
    return -1;
}

int mr_draft_is_mtp(const mr_model *m) { return mr_model_n_mtp(m) > 0 && mr_model_n_layer(m) == 0; }
