/* Perplexity and KL-divergence against a saved baseline (see mr_perplexity in moerun.h).
 * Saved-logits file: "MRPL", u32 version 1, u32 n_vocab, u32 n_ctx, u32 n_chunks, u32 rows_per_chunk,
 * then per chunk: i32 target[rows], f32 logits[rows][n_vocab] (rows = the scored positions). */
#include "moerun_tools.h"
#include "base/base.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { char magic[4]; uint32_t version, n_vocab, n_ctx, n_chunks, rows; } mr_ppl_header;

/* log-probabilities of one row as llama-perplexity computes them: lp[i] = (x[i] - max) - log(sum),
 * sum = sum of expf(x - max) (float exponentials, double sum) */
static void mr_log_softmax(const float *x, int n, double *lp) {
    float mx = x[0];
    for (int i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    double s = 0;
    for (int i = 0; i < n; i++) s += expf(x[i] - mx);
    double ls = log(s);
    for (int i = 0; i < n; i++) lp[i] = (double)(x[i] - mx) - ls;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int mr_perplexity(mr_model *m, const int32_t *tokens, int n_tokens, int n_ctx, int max_chunks, int32_t bos,
                  const char *save_path, const char *kl_base_path, mr_ppl_progress_fn progress, void *user,
                  mr_ppl_result *res) {
    int n_vocab = mr_model_n_vocab(m);
    memset(res, 0, sizeof *res);
    if (n_ctx < 4) { mr_set_error("perplexity: context %d is too small", n_ctx); return -1; }
    int n_chunks = n_tokens / n_ctx;
    if (max_chunks > 0 && max_chunks < n_chunks) n_chunks = max_chunks;
    if (n_chunks < 1) {
        mr_set_error("perplexity: need at least %d tokens for one chunk of context %d, have %d", n_ctx, n_ctx, n_tokens);
        return -1;
    }
    const int first = n_ctx / 2, rows = n_ctx - 1 - first; /* logits rows first..n_ctx-2 are scored */
    int rc = -1;
    mr_session *s = NULL;
    float *logits = NULL, *base_logits = NULL;
    double *lp = NULL, *lq = NULL, *kls = NULL;
    int32_t *chunk = NULL, *base_tgt = NULL;
    FILE *fsave = NULL, *fbase = NULL;
    double nll = 0, nll2 = 0, base_nll = 0, kl_sum = 0, kl_max = 0, cos_sum = 0, kl10_sum = 0;
    long count = 0, top1 = 0, top3 = 0;

    s = mr_session_new(m, n_ctx);
    logits = mr_malloc(sizeof(float) * (size_t)(n_ctx - first) * (size_t)n_vocab); /* positions first .. n_ctx-1 */
    lp = mr_malloc(sizeof(double) * (size_t)n_vocab);
    chunk = mr_malloc(sizeof(int32_t) * (size_t)n_ctx);
    if (!s) goto fail;
    if (!logits || !lp || !chunk) { mr_set_error("perplexity: out of memory"); goto fail; }
    if (save_path) {
        if (!(fsave = fopen(save_path, "wb"))) { mr_set_error("perplexity: cannot create %s", save_path); goto fail; }
        mr_ppl_header h = {{'M', 'R', 'P', 'L'}, 1, (uint32_t)n_vocab, (uint32_t)n_ctx, (uint32_t)n_chunks, (uint32_t)rows};
        if (fwrite(&h, sizeof h, 1, fsave) != 1) { mr_set_error("perplexity: write error on %s", save_path); goto fail; }
    }
    if (kl_base_path) {
        mr_ppl_header h;
        if (!(fbase = fopen(kl_base_path, "rb"))) { mr_set_error("perplexity: cannot open %s", kl_base_path); goto fail; }
        if (fread(&h, sizeof h, 1, fbase) != 1 || memcmp(h.magic, "MRPL", 4) || h.version != 1) {
            mr_set_error("perplexity: %s is not a moerun saved-logits file", kl_base_path);
            goto fail;
        }
        if (h.n_vocab != (uint32_t)n_vocab || h.n_ctx != (uint32_t)n_ctx || h.rows != (uint32_t)rows ||
            h.n_chunks < (uint32_t)n_chunks) {
            mr_set_error("perplexity: %s was saved with vocab %u, context %u, %u chunks; this run has vocab %d, "
                         "context %d, %d chunks", kl_base_path, h.n_vocab, h.n_ctx, h.n_chunks, n_vocab, n_ctx, n_chunks);
            goto fail;
        }
        base_logits = mr_malloc(sizeof(float) * (size_t)rows * (size_t)n_vocab);
        base_tgt = mr_malloc(sizeof(int32_t) * (size_t)rows);
        lq = mr_malloc(sizeof(double) * (size_t)n_vocab);
        kls = mr_malloc(sizeof(double) * (size_t)rows * (size_t)n_chunks);
        if (!base_logits || !base_tgt || !lq || !kls) { mr_set_error("perplexity: out of memory"); goto fail; }
    }

    for (int c = 0; c < n_chunks; c++) {
        memcpy(chunk, tokens + (size_t)c * n_ctx, sizeof(int32_t) * (size_t)n_ctx);
        if (bos >= 0) chunk[0] = bos;
        mr_session_reset(s);
        /* the first half needs no logits (the engine's results do not depend on how a sequence is split
         * into batches): evaluate it without the output layer, then the scored half with all logits */
        if (mr_session_eval(s, chunk, first, NULL, 0) != 0 ||
            mr_session_eval(s, chunk + first, n_ctx - first, logits, 1) != 0)
            goto fail;
        if (fbase && (fread(base_tgt, sizeof(int32_t), (size_t)rows, fbase) != (size_t)rows ||
                      fread(base_logits, sizeof(float) * (size_t)n_vocab, (size_t)rows, fbase) != (size_t)rows)) {
            mr_set_error("perplexity: %s is truncated", kl_base_path);
            goto fail;
        }
        for (int r = 0; r < rows; r++) {
            int pos = first + r;
            int32_t tgt = chunk[pos + 1];
            const float *row = logits + (size_t)r * n_vocab;
            mr_log_softmax(row, n_vocab, lp);
            double l = -lp[tgt];
            nll += l;
            nll2 += l * l;
            count++;
            if (fsave && (fwrite(&tgt, sizeof tgt, 1, fsave) != 1)) { mr_set_error("perplexity: write error"); goto fail; }
            if (fbase) {
                if (base_tgt[r] != tgt) {
                    mr_set_error("perplexity: baseline %s scored different tokens (chunk %d row %d): not the same text/tokenizer",
                                 kl_base_path, c, r);
                    goto fail;
                }
                const float *brow = base_logits + (size_t)r * n_vocab;
                mr_log_softmax(brow, n_vocab, lq);
                mr_logits_row_cmp cmp;
                mr_logits_compare_row(brow, row, n_vocab, &cmp);
                double kl = cmp.kl;
                kls[(size_t)c * rows + r] = kl;
                kl_sum += kl;
                if (kl > kl_max) kl_max = kl;
                top1 += cmp.rank == 0;
                top3 += cmp.rank < 3;
                cos_sum += cmp.cosine;
                kl10_sum += cmp.kl_top10;
                base_nll += -lq[tgt];
            }
        }
        if (fsave) {
            if (fwrite(logits, sizeof(float) * (size_t)n_vocab, (size_t)rows, fsave) != (size_t)rows) {
                mr_set_error("perplexity: write error on %s", save_path);
                goto fail;
            }
        }
        if (progress) progress(user, c + 1, n_chunks, exp(nll / (double)count));
    }
    {
        double mean = nll / (double)count, mean2 = nll2 / (double)count;
        res->n_chunks = n_chunks;
        res->n_scored = (int)count;
        res->nll = mean;
        res->ppl = exp(mean);
        double var = mean2 - mean * mean;
        res->ppl_err = (var > 0 && count > 1) ? sqrt(var / (double)(count - 1)) * res->ppl : 0;
        if (fbase) {
            res->has_kl = 1;
            res->kl_mean = kl_sum / (double)count;
            res->kl_max = kl_max;
            qsort(kls, (size_t)count, sizeof(double), cmp_double);
            res->kl_median = kls[count / 2];
            res->kl_p99 = kls[(size_t)((double)(count - 1) * 0.99)];
            res->top1_frac = (double)top1 / (double)count;
            res->top3_frac = (double)top3 / (double)count;
            res->cos_mean = cos_sum / (double)count;
            res->kl_top10_mean = kl10_sum / (double)count;
            res->base_ppl = exp(base_nll / (double)count);
        }
    }
    rc = 0;
fail:
    if (fsave && fclose(fsave) != 0 && rc == 0) { mr_set_error("perplexity: write error on %s", save_path); rc = -1; }
    if (fbase) fclose(fbase);
    mr_session_free(s);
    free(logits); free(base_logits); free(lp); free(lq); free(kls); free(chunk); free(base_tgt);
    return rc;
}
