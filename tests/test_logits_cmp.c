/* The comparison measures of perplexity --kl-base and the golden checks (mr_logits_compare_row,
 * mr_logits_compare): identical rows give KL 0, cosine 1, top-10 KL 0, rank 0; hand-made
 * distributions give the values worked out by hand (see each case); ties follow the argmax rule. */
#include "test.h"
#include "moerun_tools.h"

#include <math.h>

#define NV 12
/* p: a distribution whose top-10 is ids 0..9 (ids 6..9 tie at 0.02, ids 10, 11 at 0.01) */
static const double P[NV] = {0.4, 0.2, 0.1, 0.1, 0.05, 0.05, 0.02, 0.02, 0.02, 0.02, 0.01, 0.01};

static void logits_of(const double *p, float *x) {
    for (int i = 0; i < NV; i++) x[i] = (float)log(p[i]) + 3.0f; /* any shift: softmax is invariant */
}

static int near(double a, double b, double tol) { return fabs(a - b) <= tol; }

static void test_identical(void) {
    float x[NV];
    logits_of(P, x);
    mr_logits_row_cmp c;
    mr_logits_compare_row(x, x, NV, &c);
    CHECK(c.kl == 0 && c.kl_top10 == 0 && c.rank == 0, "kl %g top10 %g rank %d", c.kl, c.kl_top10, c.rank);
    CHECK(near(c.cosine, 1.0, 1e-12), "cosine %.17g", c.cosine);
}

/* q swaps the two most likely tokens: KL = 0.4 ln(0.4/0.2) + 0.2 ln(0.2/0.4) = 0.2 ln 2; both are in the
 * top 10 and the rest bins are equal, so the top-10 KL is the same; cosine = (2*0.4*0.2 + sum of the
 * other p_i^2) / sum p_i^2 = 0.1868 / 0.2268; the baseline's top-1 (id 0) is second in q */
static void test_swap_top2(void) {
    double q[NV];
    memcpy(q, P, sizeof q);
    q[0] = 0.2; q[1] = 0.4;
    float x[NV], y[NV];
    logits_of(P, x); logits_of(q, y);
    mr_logits_row_cmp c;
    mr_logits_compare_row(x, y, NV, &c);
    CHECK(near(c.kl, 0.2 * log(2.0), 1e-6), "kl %.9g", c.kl);
    CHECK(near(c.kl_top10, 0.2 * log(2.0), 1e-6), "top10 %.9g", c.kl_top10);
    CHECK(near(c.cosine, 0.1868 / 0.2268, 1e-6), "cosine %.9g", c.cosine);
    CHECK(c.rank == 1, "rank %d", c.rank);
}

/* q moves mass between the two tokens outside the top 10 (ids 10, 11: 0.01, 0.01 -> 0.015, 0.005):
 * KL = 0.01 ln(0.01/0.015) + 0.01 ln(0.01/0.005) = 0.01 ln(4/3), top-10 KL = 0 (same rest bin) */
static void test_tail_only(void) {
    double q[NV];
    memcpy(q, P, sizeof q);
    q[10] = 0.015; q[11] = 0.005;
    float x[NV], y[NV];
    logits_of(P, x); logits_of(q, y);
    mr_logits_row_cmp c;
    mr_logits_compare_row(x, y, NV, &c);
    CHECK(near(c.kl, 0.01 * log(4.0 / 3.0), 1e-7), "kl %.9g", c.kl);
    CHECK(near(c.kl_top10, 0, 1e-7), "top10 %.9g", c.kl_top10);
    CHECK(c.rank == 0, "rank %d", c.rank);
}

/* mass moved from id 9 (in the top 10: ids 6..9 tie and the lower ids come first) to id 10 (outside):
 * p9 0.02 -> q9 0.01, p10 0.01 -> q10 0.02. Full KL = 0.02 ln 2 + 0.01 ln(1/2) = 0.01 ln 2; the
 * top-10 KL has bin 9 (0.02 ln 2) and the rest bin (p 0.02 vs q 0.03: 0.02 ln(2/3)) */
static void test_topn_ties(void) {
    double q[NV];
    memcpy(q, P, sizeof q);
    q[9] = 0.01; q[10] = 0.02;
    float x[NV], y[NV];
    logits_of(P, x); logits_of(q, y);
    mr_logits_row_cmp c;
    mr_logits_compare_row(x, y, NV, &c);
    CHECK(near(c.kl, 0.01 * log(2.0), 1e-7), "kl %.9g", c.kl);
    CHECK(near(c.kl_top10, 0.02 * log(2.0) + 0.02 * log(2.0 / 3.0), 1e-7), "top10 %.9g", c.kl_top10);
}

/* the baseline's top-1 pushed to 4th place: rank 3 (not in the top 3); a tie with a lower id ranks
 * that id first (the argmax rule) */
static void test_rank(void) {
    double q[NV] = {0.1, 0.2, 0.15, 0.12, 0.1, 0.1, 0.05, 0.05, 0.05, 0.04, 0.02, 0.02};
    float x[NV], y[NV];
    logits_of(P, x); logits_of(q, y);
    mr_logits_row_cmp c;
    mr_logits_compare_row(x, y, NV, &c);
    CHECK(c.rank == 3, "rank %d", c.rank);
    float a[4] = {0, 5, 1, 2}, b[4] = {5, 5, 1, 2}; /* base top-1 id 1; in b ids 0 and 1 tie: id 0 first */
    mr_logits_compare_row(a, b, 4, &c);
    CHECK(c.rank == 1, "tie rank %d", c.rank);
    mr_logits_compare_row(b, b, 4, &c);
    CHECK(c.rank == 0, "self tie rank %d", c.rank);
}

/* fewer tokens than 10: the top-10 KL covers every token and equals the full KL (the rest bin is empty) */
static void test_small_vocab(void) {
    float a[3] = {1, 2, 3}, b[3] = {3, 2, 1};
    mr_logits_row_cmp c;
    mr_logits_compare_row(a, b, 3, &c);
    CHECK(c.kl > 0.1 && near(c.kl_top10, c.kl, 1e-12), "kl %.9g top10 %.9g", c.kl, c.kl_top10);
    CHECK(c.rank == 2 && near(c.kl, mr_logits_kl(a, b, 3), 0), "rank %d", c.rank);
}

/* mr_logits_compare uses the same rows: top-1 count and KL agree */
static void test_compare_rows(void) {
    float x[2 * NV], y[2 * NV];
    double q[NV];
    memcpy(q, P, sizeof q);
    q[0] = 0.2; q[1] = 0.4;
    logits_of(P, x); logits_of(P, x + NV);
    logits_of(P, y); logits_of(q, y + NV);
    mr_logits_cmp c;
    CHECK(mr_logits_compare(x, y, 2, NV, &c) == 0, "compare");
    CHECK(c.top1_equal == 1 && near(c.kl_max, 0.2 * log(2.0), 1e-6) && c.kl_max_row == 1, "top1 %d max %g row %d",
          c.top1_equal, c.kl_max, c.kl_max_row);
}

int main(void) {
    RUN(test_identical);
    RUN(test_swap_top2);
    RUN(test_tail_only);
    RUN(test_topn_ties);
    RUN(test_rank);
    RUN(test_small_vocab);
    RUN(test_compare_rows);
    return t_finish();
}
