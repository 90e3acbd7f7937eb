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

/* One run's files, buffers and running sums. */
typedef struct {
    int n_vocab, n_ctx, n_chunks, first, rows;
    const char *save_path, *base_path;
    FILE *fsave, *fbase;
    float *logits, *base_logits; /* [n_ctx - first][n_vocab], [rows][n_vocab] */
    double *lp, *lq, *kls;       /* [n_vocab], [n_vocab], [n_chunks * rows] */
    int32_t *chunk, *base_tgt;   /* [n_ctx], [rows] */
    double nll, nll2, base_nll, kl_sum, kl_max, cos_sum, kl10_sum;
    long count, top1, top3;
} ppl_run;

static int open_save(ppl_run *p) {
    if (!(p->fsave = fopen(p->save_path, "wb"))) { mr_set_error("perplexity: cannot create %s", p->save_path); return -1; }
    mr_ppl_header h = {{'M', 'R', 'P', 'L'}, 1, (uint32_t)p->n_vocab, (uint32_t)p->n_ctx, (uint32_t)p->n_chunks,
                       (uint32_t)p->rows};
    if (fwrite(&h, sizeof h, 1, p->fsave) != 1) { mr_set_error("perplexity: write error on %s", p->save_path); return -1; }
    return 0;
}

/* The baseline must have been saved with this vocabulary, context and at least this many chunks. */
static int open_base(ppl_run *p) {
    mr_ppl_header h;
    if (!(p->fbase = fopen(p->base_path, "rb"))) { mr_set_error("perplexity: cannot open %s", p->base_path); return -1; }
    if (fread(&h, sizeof h, 1, p->fbase) != 1 || memcmp(h.magic, "MRPL", 4) || h.version != 1) {
        mr_set_error("perplexity: %s is not a moerun saved-logits file", p->base_path);
        return -1;
    }
    if (h.n_vocab != (uint32_t)p->n_vocab || h.n_ctx != (uint32_t)p->n_ctx || h.rows != (uint32_t)p->rows ||
        h.n_chunks < (uint32_t)p->n_chunks) {
        mr_set_error("perplexity: %s was saved with vocab %u, context %u, %u chunks; this run has vocab %d, "
                     "context %d, %d chunks", p->base_path, h.n_vocab, h.n_ctx, h.n_chunks, p->n_vocab, p->n_ctx,
                     p->n_chunks);
        return -1;
    }
    p->base_logits = mr_malloc(sizeof(float) * (size_t)p->rows * (size_t)p->n_vocab);
    p->base_tgt = mr_malloc(sizeof(int32_t) * (size_t)p->rows);
    p->lq = mr_malloc(sizeof(double) * (size_t)p->n_vocab);
    p->kls = mr_malloc(sizeof(double) * (size_t)p->rows * (size_t)p->n_chunks);
    if (!p->base_logits || !p->base_tgt || !p->lq || !p->kls) { mr_set_error("perplexity: out of memory"); return -1; }
    return 0;
}

/* Scores chunk c's rows (p->logits holds positions first..n_ctx-1): NLL of the next token, and against
 * the baseline's rows KL, rank and cosine; saves targets and logits when asked. */
static int score_chunk(ppl_run *p, int c) {
    int n_vocab = p->n_vocab, rows = p->rows;
    if (p->fbase && (fread(p->base_tgt, sizeof(int32_t), (size_t)rows, p->fbase) != (size_t)rows ||
                     fread(p->base_logits, sizeof(float) * (size_t)n_vocab, (size_t)rows, p->fbase) != (size_t)rows)) {
        mr_set_error("perplexity: %s is truncated", p->base_path);
        return -1;
    }
    for (int r = 0; r < rows; r++) {
        int32_t tgt = p->chunk[p->first + r + 1];
        const float *row = p->logits + (size_t)r * n_vocab;
        mr_log_softmax(row, n_vocab, p->lp);
        double l = -p->lp[tgt];
        p->nll += l;
        p->nll2 += l * l;
        p->count++;
        if (p->fsave && (fwrite(&tgt, sizeof tgt, 1, p->fsave) != 1)) { mr_set_error("perplexity: write error"); return -1; }
        if (!p->fbase) continue;
        if (p->base_tgt[r] != tgt) {
            mr_set_error("perplexity: baseline %s scored different tokens (chunk %d row %d): not the same text/tokenizer",
                         p->base_path, c, r);
            return -1;
        }
        const float *brow = p->base_logits + (size_t)r * n_vocab;
        mr_log_softmax(brow, n_vocab, p->lq);
        mr_logits_row_cmp cmp;
        mr_logits_compare_row(brow, row, n_vocab, &cmp);
        p->kls[(size_t)c * rows + r] = cmp.kl;
        p->kl_sum += cmp.kl;
        if (cmp.kl > p->kl_max) p->kl_max = cmp.kl;
        p->top1 += cmp.rank == 0;
        p->top3 += cmp.rank < 3;
        p->cos_sum += cmp.cosine;
        p->kl10_sum += cmp.kl_top10;
        p->base_nll += -p->lq[tgt];
    }
    if (p->fsave && fwrite(p->logits, sizeof(float) * (size_t)n_vocab, (size_t)rows, p->fsave) != (size_t)rows) {
        mr_set_error("perplexity: write error on %s", p->save_path);
        return -1;
    }
    return 0;
}

static void summarize(ppl_run *p, mr_ppl_result *res) {
    double count = (double)p->count, mean = p->nll / count, mean2 = p->nll2 / count;
    res->n_chunks = p->n_chunks;
    res->n_scored = (int)p->count;
    res->nll = mean;
    res->ppl = exp(mean);
    double var = mean2 - mean * mean;
    res->ppl_err = (var > 0 && p->count > 1) ? sqrt(var / (count - 1)) * res->ppl : 0;
    if (!p->fbase) return;
    res->has_kl = 1;
    res->kl_mean = p->kl_sum / count;
    res->kl_max = p->kl_max;
    qsort(p->kls, (size_t)p->count, sizeof(double), cmp_double);
    res->kl_median = p->kls[p->count / 2];
    res->kl_p99 = p->kls[(size_t)((count - 1) * 0.99)];
    res->top1_frac = (double)p->top1 / count;
    res->top3_frac = (double)p->top3 / count;
    res->cos_mean = p->cos_sum / count;
    res->kl_top10_mean = p->kl10_sum / count;
    res->base_ppl = exp(p->base_nll / count);
}

/* tokens [0, n) of the chunk after what s holds, in evaluations of at most n_batch (0: one), the
 * logits of every token into logits[n][n_vocab] (NULL: none) */
static int eval_pieces(mr_session *s, const int32_t *tok, int n, int n_batch, float *logits, int n_vocab) {
    const int step = n_batch > 0 ? n_batch : n;
    for (int i = 0; i < n; i += step) {
        const int k = n - i < step ? n - i : step;
        if (mr_session_eval(s, tok + i, k, logits ? logits + (size_t)i * n_vocab : NULL, logits != NULL)) return -1;
    }
    return 0;
}

int mr_perplexity(mr_model *m, const int32_t *tokens, int n_tokens, int n_ctx, int max_chunks, int n_batch, int32_t bos,
                  const char *save_path, const char *kl_base_path, mr_ppl_progress_fn progress, void *user,
                  mr_ppl_result *res) {
    memset(res, 0, sizeof *res);
    if (n_ctx < 4) { mr_set_error("perplexity: context %d is too small", n_ctx); return -1; }
    int n_chunks = n_tokens / n_ctx;
    if (max_chunks > 0 && max_chunks < n_chunks) n_chunks = max_chunks;
    if (n_chunks < 1) {
        mr_set_error("perplexity: need at least %d tokens for one chunk of context %d, have %d", n_ctx, n_ctx, n_tokens);
        return -1;
    }
    ppl_run p = {0};
    p.n_vocab = mr_model_n_vocab(m);
    p.n_ctx = n_ctx;
    p.n_chunks = n_chunks;
    p.first = n_ctx / 2;
    p.rows = n_ctx - 1 - p.first; /* logits rows first..n_ctx-2 are scored */
    p.save_path = save_path;
    p.base_path = kl_base_path;
    int rc = -1;
    mr_session *s = mr_session_new(m, n_ctx);
    p.logits = mr_malloc(sizeof(float) * (size_t)(n_ctx - p.first) * (size_t)p.n_vocab);
    p.lp = mr_malloc(sizeof(double) * (size_t)p.n_vocab);
    p.chunk = mr_malloc(sizeof(int32_t) * (size_t)n_ctx);
    if (!s) goto fail;
    if (!p.logits || !p.lp || !p.chunk) { mr_set_error("perplexity: out of memory"); goto fail; }
    if ((save_path && open_save(&p)) || (kl_base_path && open_base(&p))) goto fail;

    for (int c = 0; c < n_chunks; c++) {
        memcpy(p.chunk, tokens + (size_t)c * n_ctx, sizeof(int32_t) * (size_t)n_ctx);
        if (bos >= 0) p.chunk[0] = bos;
        mr_session_reset(s);
        /* the first half needs no logits (the engine's results do not depend on how a sequence is split
         * into batches): evaluate it without the output layer, then the scored half with all logits */
        if (eval_pieces(s, p.chunk, p.first, n_batch, NULL, p.n_vocab) ||
            eval_pieces(s, p.chunk + p.first, n_ctx - p.first, n_batch, p.logits, p.n_vocab) || score_chunk(&p, c))
            goto fail;
        if (progress) progress(user, c + 1, n_chunks, exp(p.nll / (double)p.count));
    }
    summarize(&p, res);
    rc = 0;
fail:
    if (p.fsave && fclose(p.fsave) != 0 && rc == 0) { mr_set_error("perplexity: write error on %s", save_path); rc = -1; }
    if (p.fbase) fclose(p.fbase);
    mr_session_free(s);
    free(p.logits); free(p.base_logits); free(p.lp); free(p.lq); free(p.kls); free(p.chunk); free(p.base_tgt);
    return rc;
}
