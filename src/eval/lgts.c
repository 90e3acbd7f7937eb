/* .lgts logits files and the golden comparison (KL per row, tolerance classes of shared/README.md). */
#include "moerun_tools.h"
#include "base/base.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mr_lgts_write(const char *path, int n_rows, int n_vocab, const int32_t *positions, const float *logits) {
    FILE *f = fopen(path, "wb");
    if (!f) { mr_set_error("%s: cannot create", path); return -1; }
    int32_t hdr[3] = {1, n_rows, n_vocab};
    int ok = fwrite("LGTS", 1, 4, f) == 4 && fwrite(hdr, 4, 3, f) == 3 &&
             fwrite(positions, 4, (size_t)n_rows, f) == (size_t)n_rows &&
             fwrite(logits, 4, (size_t)n_rows * n_vocab, f) == (size_t)n_rows * n_vocab;
    if (fclose(f)) ok = 0;
    if (!ok) { mr_set_error("%s: write failed", path); return -1; }
    return 0;
}

int mr_lgts_read(const char *path, int *n_rows, int *n_vocab, int32_t **positions, float **logits) {
    *positions = NULL; *logits = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) { mr_set_error("%s: cannot open", path); return -1; }
    char magic[4];
    int32_t hdr[3];
    if (fread(magic, 1, 4, f) != 4 || memcmp(magic, "LGTS", 4) || fread(hdr, 4, 3, f) != 3 || hdr[0] != 1 ||
        hdr[1] < 0 || hdr[2] <= 0 || hdr[1] > (1 << 24) || hdr[2] > (1 << 24)) {
        fclose(f);
        mr_set_error("%s: not an LGTS version 1 file", path);
        return -1;
    }
    size_t nr = (size_t)hdr[1], nv = (size_t)hdr[2];
    int32_t *pos = mr_malloc(4 * (nr ? nr : 1));
    float *lg = mr_malloc(4 * (nr ? nr : 1) * nv);
    if (!pos || !lg || fread(pos, 4, nr, f) != nr || fread(lg, 4, nr * nv, f) != nr * nv) {
        free(pos); free(lg); fclose(f);
        mr_set_error("%s: truncated or out of memory", path);
        return -1;
    }
    fclose(f);
    *n_rows = hdr[1]; *n_vocab = hdr[2]; *positions = pos; *logits = lg;
    return 0;
}

/* log-softmax normaliser: max + log(sum exp(x - max)) in double */
static double log_sum_exp(const float *x, int n) {
    double mx = -INFINITY;
    for (int i = 0; i < n; i++) if (x[i] > mx) mx = x[i];
    double s = 0;
    for (int i = 0; i < n; i++) s += exp((double)x[i] - mx);
    return mx + log(s);
}

double mr_logits_kl(const float *ref, const float *eng, int n_vocab) {
    mr_logits_row_cmp c;
    mr_logits_compare_row(ref, eng, n_vocab, &c);
    return c.kl;
}

void mr_logits_compare_row(const float *ref, const float *eng, int n_vocab, mr_logits_row_cmp *out) {
    double lr = log_sum_exp(ref, n_vocab), le = log_sum_exp(eng, n_vocab);
    double kl = 0, pq = 0, pp = 0, qq = 0;
    /* the baseline's MR_LOGITS_TOPN largest logits, in descending order (ties: lower id first) */
    int top[MR_LOGITS_TOPN], nt = 0;
    for (int i = 0; i < n_vocab; i++) {
        double a = (double)ref[i] - lr, b = (double)eng[i] - le;
        double p = exp(a), q = exp(b);
        if (p > 0) kl += p * (a - b);
        pq += p * q; pp += p * p; qq += q * q;
        if (nt < MR_LOGITS_TOPN || ref[i] > ref[top[nt - 1]]) {
            int j = nt < MR_LOGITS_TOPN ? nt++ : nt - 1;
            for (; j > 0 && ref[i] > ref[top[j - 1]]; j--) top[j] = top[j - 1];
            top[j] = i;
        }
    }
    out->kl = kl < 0 ? 0 : kl;
    out->cosine = pp > 0 && qq > 0 ? pq / (sqrt(pp) * sqrt(qq)) : 0;
    /* 11-bin KL: the baseline's top tokens one by one, the rest summed (not 1 - sum: no cancellation) */
    double kt = 0, pr = 0, qr = 0;
    for (int j = 0; j < nt; j++) {
        double a = (double)ref[top[j]] - lr, b = (double)eng[top[j]] - le, p = exp(a);
        if (p > 0) kt += p * (a - b);
    }
    for (int i = 0; i < n_vocab; i++) {
        int in = 0;
        for (int j = 0; j < nt && !in; j++) in = top[j] == i;
        if (!in) { pr += exp((double)ref[i] - lr); qr += exp((double)eng[i] - le); }
    }
    if (pr > 0) kt += qr > 0 ? pr * log(pr / qr) : INFINITY;
    out->kl_top10 = kt < 0 ? 0 : kt;
    /* rank of the baseline's top-1 among eng's logits, the argmax's tie rule (first maximum wins) */
    int b1 = nt ? top[0] : 0, rank = 0;
    for (int i = 0; i < n_vocab; i++) rank += eng[i] > eng[b1] || (eng[i] == eng[b1] && i < b1);
    out->rank = rank;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* nearest-rank percentile of sorted v[n] */
static double percentile(const double *v, int n, double q) {
    if (n <= 0) return 0;
    int k = (int)ceil(q * n) - 1;
    if (k < 0) k = 0;
    if (k >= n) k = n - 1;
    return v[k];
}

int mr_logits_compare(const float *ref, const float *eng, int n_rows, int n_vocab, mr_logits_cmp *out) {
    memset(out, 0, sizeof *out);
    out->n_rows = n_rows;
    if (n_rows <= 0) return 0;
    double *kl = mr_malloc(sizeof(double) * (size_t)n_rows);
    if (!kl) { mr_set_error("compare: out of memory"); return -1; }
    double sum = 0;
    for (int r = 0; r < n_rows; r++) {
        const float *a = ref + (size_t)r * n_vocab, *b = eng + (size_t)r * n_vocab;
        mr_logits_row_cmp c;
        mr_logits_compare_row(a, b, n_vocab, &c);
        kl[r] = c.kl == c.kl ? c.kl : INFINITY; /* NaN counts as a failure */
        sum += kl[r];
        if (r == 0 || kl[r] > out->kl_max) { out->kl_max = kl[r]; out->kl_max_row = r; }
        out->top1_equal += c.rank == 0;
    }
    out->kl_mean = sum / n_rows;
    qsort(kl, (size_t)n_rows, sizeof(double), cmp_double);
    out->kl_median = n_rows % 2 ? kl[n_rows / 2] : 0.5 * (kl[n_rows / 2 - 1] + kl[n_rows / 2]);
    out->kl_p95 = percentile(kl, n_rows, 0.95);
    out->top1_frac = (double)out->top1_equal / n_rows;
    free(kl);
    return 0;
}

int mr_logits_check_class(const char *cls, const mr_logits_cmp *c, char *why, size_t why_len) {
    double max_kl = INFINITY, med = INFINITY, p95 = INFINITY, top1 = 0;
    if (!strcmp(cls, "strict")) { max_kl = 1e-4; top1 = 1.0; }
    else if (!strcmp(cls, "quant")) { max_kl = 5e-3; med = 1e-3; top1 = 0.90; }
    else if (!strcmp(cls, "chaotic")) { med = 5e-3; p95 = 3e-2; top1 = 0.85; }
    else if (!strcmp(cls, "indexer")) { med = 1e-2; p95 = 1e-1; }
    else { if (why_len) snprintf(why, why_len, "unknown tolerance class '%s'", cls); return -1; }
    const char *fail = NULL;
    double got = 0, lim = 0;
    if (c->kl_max > max_kl) { fail = "max KL"; got = c->kl_max; lim = max_kl; }
    else if (c->kl_median > med) { fail = "median KL"; got = c->kl_median; lim = med; }
    else if (c->kl_p95 > p95) { fail = "p95 KL"; got = c->kl_p95; lim = p95; }
    else if (c->top1_frac < top1) { fail = "top-1 agreement"; got = c->top1_frac; lim = top1; }
    if (why_len) {
        if (fail) snprintf(why, why_len, "%s %.3g beyond %.3g (max %.3g at row %d, median %.3g, p95 %.3g, top-1 %d/%d)",
                           fail, got, lim, c->kl_max, c->kl_max_row, c->kl_median, c->kl_p95, c->top1_equal, c->n_rows);
        else snprintf(why, why_len, "max %.3g median %.3g p95 %.3g top-1 %d/%d", c->kl_max, c->kl_median, c->kl_p95,
                      c->top1_equal, c->n_rows);
    }
    return fail ? 0 : 1;
}
