/* deepseek4 against mainline llama.cpp's logits (tests/golden/ds4-mainline/, produced as its README
 * says), with --graph mainline: tiny models with swiglu_clamp_shexp set low enough to bite, with the
 * key absent, with a bundled MTP block, the published V4 mix (IQ3_S / MXFP4 experts, Q8_0 elsewhere),
 * and ../shared's tiny-deepseek4; prefill and decode, with the
 * routed experts resident and paged through the smallest legal RAM budget, in the tolerance classes
 * of ../shared/README.md. The default (official) graph must differ from mainline on every file (it
 * simulates FP8 KV rows), by more than the strict class allows. */
#include "moerun.h"
#include "moerun_tools.h"
#include "test.h"

#include <math.h>
#include <stdint.h>
#include <unistd.h>

#define DIR "tests/golden/ds4-mainline/"

typedef struct {
    char name[64], model[128], mix[32], layout[32], golden[64], cls[32], hash[32], shape[64], side_hash[32];
    unsigned long long seed;
    float shexp;
    int mtp; /* also the MTP block's draft logits (mr_session_mtp_draft), loaded with params.mtp: 1 the
                file's own block, 2 a sidecar's (layout mtp-only, same shape/mix/seed, hash side_hash);
                3: a DSpark drafter's blocks (layout dspark, same shape/mix/seed, hash side_hash) */
} ml_entry;

static int read_manifest(ml_entry *e, int max) {
    FILE *f = fopen(DIR "manifest.tsv", "r");
    if (!f) return -1;
    char line[512];
    int n = 0;
    while (n < max && fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        snprintf(e[n].shape, sizeof e[n].shape, "deepseek-v4-tiny");
        e[n].mtp = 0;
        snprintf(e[n].side_hash, sizeof e[n].side_hash, "-");
        int k = sscanf(line, "%63s %127s %31s %llu %31s %f %63s %31s %31s %63s %d %31s", e[n].name, e[n].model, e[n].mix,
                       &e[n].seed, e[n].layout, &e[n].shexp, e[n].golden, e[n].cls, e[n].hash, e[n].shape, &e[n].mtp,
                       e[n].side_hash);
        if (k == 9 || k == 11 || k == 12) n++;
    }
    fclose(f);
    return n;
}

static unsigned long long fnv1a_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    unsigned long long h = 0xcbf29ce484222325ull;
    unsigned char buf[65536];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0)
        for (size_t i = 0; i < k; i++) h = (h ^ buf[i]) * 0x100000001b3ull;
    fclose(f);
    return h;
}

static int32_t *read_ids(const char *path, int *n) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    int cap = 1024, k = 0;
    int32_t *v = malloc(sizeof(int32_t) * (size_t)cap);
    long x;
    while (v && k < cap && fscanf(f, " %ld ,", &x) == 1) v[k++] = (int32_t)x;
    fclose(f);
    *n = k;
    return v;
}

/* logits [n][V] of ids as one batch or one at a time */
static float *eval_ids(mr_model *m, const int32_t *ids, int n, int decode) {
    const int V = mr_model_n_vocab(m);
    float *lg = malloc(sizeof(float) * (size_t)n * (size_t)V);
    mr_session *s = mr_session_new(m, n);
    int rc = !lg || !s;
    if (decode) { for (int i = 0; i < n && !rc; i++) rc = mr_session_eval(s, ids + i, 1, lg + (size_t)i * V, 0); }
    else if (!rc) rc = mr_session_eval(s, ids, n, lg, 1);
    mr_session_free(s);
    if (rc) { free(lg); return NULL; }
    return lg;
}

/* compare the golden rows; returns 1 pass, 0 fail (why filled) */
/* compare with the golden file DIR base.path.lgts (base: the entry's golden name, its own name for the
 * MTP files) */
static int check(const char *base, const char *path, const float *lg, int n, int V, const char *cls, char *why, size_t wl,
                 mr_logits_cmp *c) {
    char rel[256];
    snprintf(rel, sizeof rel, DIR "%.63s.%.16s.lgts", base, path);
    int nr, nv;
    int32_t *pos;
    float *ref;
    if (mr_lgts_read(rel, &nr, &nv, &pos, &ref)) { snprintf(why, wl, "%s", mr_last_error()); return 0; }
    float *sel = malloc(sizeof(float) * (size_t)nr * (size_t)nv);
    int ok = sel && nv == V, rc = 0;
    for (int r = 0; ok && r < nr; r++) {
        if (pos[r] < 0 || pos[r] >= n) ok = 0;
        else memcpy(sel + (size_t)r * nv, lg + (size_t)pos[r] * V, sizeof(float) * (size_t)nv);
    }
    if (!ok) snprintf(why, wl, "golden %s does not fit (n_vocab %d vs %d, or positions)", rel, nv, V);
    else if (mr_logits_compare(ref, sel, nr, nv, c) == 0) rc = mr_logits_check_class(cls, c, why, wl) == 1;
    else snprintf(why, wl, "compare: %s", mr_last_error());
    free(sel); free(pos); free(ref);
    return rc;
}

/* The MTP block's logits for ids[p] at the positions p of the golden file `path` (mtp-prefill: the trunk
 * evaluated ids[0..p) as one batch in a fresh session, so the block catches up on the whole window at
 * once; mtp-decode: one session stepping token by token, a one-step draft before each token): [n][V],
 * rows of other positions zero. */
static float *mtp_rows(mr_model *m, mr_model *side, const ml_entry *e, const char *path, const int32_t *ids, int n) {
    char rel[256];
    snprintf(rel, sizeof rel, DIR "%.63s.%.16s.lgts", e->name, path);
    int nr, nv, decode = !strcmp(path, "mtp-decode");
    int32_t *pos, out;
    float *ref, *lg = NULL;
    if (mr_lgts_read(rel, &nr, &nv, &pos, &ref)) return NULL;
    const int V = mr_model_n_vocab(m);
    lg = calloc((size_t)n * (size_t)V, sizeof(float));
    mr_session *s = decode ? mr_session_new(m, n + 8) : NULL, *ms = side ? mr_session_new(side, n + 8) : NULL;
    int rc = !lg || (decode && !s) || (side && !ms);
    for (int r = 0; !rc && r < nr; r++) {
        const int p = pos[r];
        if (p < 0 || p >= n) { rc = 1; break; }
        if (!decode) {
            s = mr_session_new(m, n + 8);
            rc = !s || (p > 0 && mr_session_eval(s, ids, p, NULL, 0));
        } else {
            for (int q = mr_session_n_past(s); !rc && q < p; q++) rc = mr_session_mtp_draft(s, ms, ids[q], 1, &out, NULL) != 1 ||
                                                                        mr_session_eval(s, ids + q, 1, NULL, 0);
        }
        if (!rc) rc = mr_session_mtp_draft(s, ms, ids[p], 1, &out, lg + (size_t)p * V) != 1;
        if (!decode) { mr_session_free(s); s = NULL; }
    }
    mr_session_free(s);
    mr_session_free(ms);
    free(pos); free(ref);
    if (rc) { free(lg); return NULL; }
    return lg;
}

/* draft chains (NAME.chain.txt: position p, then mainline's 4 greedy drafts after the trunk took
 * ids[0..p); NAME.chain.lgts: each step's logits): the same drafts, the logits in the entry's class */
static void check_chain(const ml_entry *e, mr_model *m, mr_model *side, const int32_t *ids, int n, int paged) {
    char rel[256];
    snprintf(rel, sizeof rel, DIR "%.63s.chain.txt", e->name);
    FILE *f = fopen(rel, "r");
    snprintf(rel, sizeof rel, DIR "%.63s.chain.lgts", e->name);
    int nr = 0, nv = 0, row = 0, bad = 0, p, want[4];
    int32_t *pos = NULL;
    float *ref = NULL;
    if (!f || mr_lgts_read(rel, &nr, &nv, &pos, &ref)) { printf("FAIL %s.chain: cannot read %s\n", e->name, rel); t_failed++; if (f) fclose(f); return; }
    const int V = mr_model_n_vocab(m);
    float *lg = malloc(sizeof(float) * (size_t)nr * (size_t)V);
    char why[512] = "";
    while (lg && fscanf(f, "%d %d %d %d %d", &p, &want[0], &want[1], &want[2], &want[3]) == 5 && row + 4 <= nr && p < n) {
        mr_session *s = mr_session_new(m, n + 8), *ms = side ? mr_session_new(side, n + 8) : NULL;
        int32_t got[4];
        if (!s || (side && !ms) || mr_session_eval(s, ids, p, NULL, 0) ||
            mr_session_mtp_draft(s, ms, ids[p], 4, got, lg + (size_t)row * V) != 4) {
            snprintf(why, sizeof why, "draft at %d: %s", p, mr_last_error());
            bad = 1;
        }
        for (int i = 0; !bad && i < 4; i++)
            if (got[i] != want[i]) { snprintf(why, sizeof why, "at %d draft %d is %d, mainline's %d", p, i, got[i], want[i]); bad = 1; }
        mr_session_free(s);
        mr_session_free(ms);
        row += 4;
    }
    fclose(f);
    mr_logits_cmp c;
    if (!bad && (row != nr || !lg || nv != V)) { snprintf(why, sizeof why, "chain files do not fit (%d of %d rows)", row, nr); bad = 1; }
    if (!bad && (mr_logits_compare(ref, lg, nr, V, &c) || mr_logits_check_class(e->cls, &c, why, sizeof why) != 1)) bad = 1;
    printf("%s %s.chain.%s [%s] %d chains of 4 drafts %s\n", bad ? "FAIL" : "ok", e->name, paged ? "paged" : "resident",
           e->cls, nr / 4, why);
    if (bad) t_failed++; else t_passed++;
    free(lg); free(pos); free(ref);
}

/* One DSpark block after the target took ids[0..p) (decode: one token per eval, a one-token draft before
 * each, as the driver injects after every target batch): the drafts, confidences and the block's logits
 * (rows [k][V]) for ids[p]; 0 or -1 */
static int dspark_block(mr_model *m, mr_model *side, const int32_t *ids, int n, int p, int decode, int k, int32_t *got,
                        float *conf, float *lg) {
    mr_session *s = mr_session_new(m, n + 16), *ds = mr_session_new(side, n + 16);
    int32_t one;
    int rc = !s || !ds;
    if (!rc && !decode && p > 0) rc = mr_session_eval(s, ids, p, NULL, 0);
    for (int q = 0; !rc && decode && q < p; q++)
        rc = mr_session_draft_conf(s, ds, ids[q], 1, &one, NULL, NULL) != 1 || mr_session_eval(s, ids + q, 1, NULL, 0);
    if (!rc) rc = mr_session_draft_conf(s, ds, ids[p], k, got, lg, conf) != k;
    mr_session_free(s);
    mr_session_free(ds);
    return rc ? -1 : 0;
}

/* the DSpark goldens (NAME.dspark-PATH.txt: p, mainline's k drafts and k confidences per block;
 * NAME.dspark-PATH.lgts: the blocks' logits with the Markov bias): the same drafts, confidences within
 * 1e-3 (mainline's own two paths differ by up to 2.1e-4), the logits in the entry's class */
static void check_dspark(const ml_entry *e, mr_model *m, mr_model *side, const int32_t *ids, int n, int paged) {
    enum { K = 8 };
    for (int d = 0; d < 2; d++) {
        const char *path = d ? "dspark-decode" : "dspark-prefill";
        char rel[256], why[512] = "";
        snprintf(rel, sizeof rel, DIR "%.63s.%s.txt", e->name, path);
        FILE *f = fopen(rel, "r");
        snprintf(rel, sizeof rel, DIR "%.63s.%s.lgts", e->name, path);
        int nr = 0, nv = 0, row = 0, bad = !f, p;
        int32_t *pos = NULL;
        float *ref = NULL, cmax = 0.0f;
        if (bad || mr_lgts_read(rel, &nr, &nv, &pos, &ref)) { snprintf(why, sizeof why, "cannot read %s", rel); bad = 1; }
        const int V = mr_model_n_vocab(m);
        float *lg = bad ? NULL : malloc(sizeof(float) * (size_t)nr * (size_t)V);
        while (lg && !bad && fscanf(f, "%d", &p) == 1 && row + K <= nr && p < n) {
            int32_t want[K], got[K];
            float wc[K], gc[K];
            for (int i = 0; i < K; i++) bad |= fscanf(f, "%d", &want[i]) != 1;
            for (int i = 0; i < K; i++) bad |= fscanf(f, "%f", &wc[i]) != 1;
            if (!bad && dspark_block(m, side, ids, n, p, d, K, got, gc, lg + (size_t)row * V)) {
                snprintf(why, sizeof why, "block at %d: %s", p, mr_last_error());
                bad = 1;
            }
            for (int i = 0; !bad && i < K; i++) {
                if (got[i] != want[i]) { snprintf(why, sizeof why, "at %d draft %d is %d, mainline's %d", p, i, got[i], want[i]); bad = 1; }
                const float dc = fabsf(gc[i] - wc[i]);
                cmax = dc > cmax ? dc : cmax;
                if (!(dc <= 1e-3f)) { snprintf(why, sizeof why, "at %d confidence %d is %g, mainline's %g", p, i, gc[i], wc[i]); bad = 1; }
            }
            row += K;
        }
        if (f) fclose(f);
        mr_logits_cmp c;
        if (!bad && (row != nr || !lg || nv != V)) { snprintf(why, sizeof why, "dspark files do not fit (%d of %d rows)", row, nr); bad = 1; }
        if (!bad && (mr_logits_compare(ref, lg, nr, V, &c) || mr_logits_check_class(e->cls, &c, why, sizeof why) != 1)) bad = 1;
        printf("%s %s.%s.%s [%s] %d blocks of %d drafts, confidence max diff %.2g %s\n", bad ? "FAIL" : "ok", e->name, path,
               paged ? "paged" : "resident", e->cls, nr / K, K, (double)cmax, why);
        if (bad) t_failed++; else t_passed++;
        free(lg); free(pos); free(ref);
    }
}

static void check_mtp(const ml_entry *e, mr_model *m, mr_model *side, const int32_t *ids, int n, int paged) {
    if (e->mtp == 3) { check_dspark(e, m, side, ids, n, paged); return; }
    for (int d = 0; d < 2; d++) {
        const char *path = d ? "mtp-decode" : "mtp-prefill";
        float *lg = mtp_rows(m, side, e, path, ids, n);
        char why[512];
        mr_logits_cmp c;
        if (!lg) { printf("FAIL %s.%s: %s\n", e->name, path, mr_last_error()); t_failed++; continue; }
        int ok = check(e->name, path, lg, n, mr_model_n_vocab(m), e->cls, why, sizeof why, &c);
        printf("%s %s.%s.%s [%s] %s\n", ok ? "ok" : "FAIL", e->name, path, paged ? "paged" : "resident", e->cls, why);
        if (ok) t_passed++; else t_failed++;
        free(lg);
    }
    check_chain(e, m, side, ids, n, paged);
}

/* the entry's model synthesized with `layout` into path, checked against the hash the goldens were made
 * from; 0, or -1 (counted as a failure) */
static int synth_checked(const ml_entry *e, const char *layout, const char *hash, const char *path) {
    mr_synth_params sp = {.shape = e->shape, .mix = e->mix, .seed = e->seed, .layout = layout, .shexp_clamp = e->shexp};
    if (mr_synth(path, &sp)) { printf("FAIL %s: synth: %s\n", e->name, mr_last_error()); t_failed++; return -1; }
    unsigned long long h = fnv1a_file(path), want = strtoull(hash, NULL, 16);
    if (h == want) return 0;
    printf("FAIL %s: the synthesized %s file's hash is %016llx, the goldens were made from %016llx: moerun synth "
           "changed; regenerate the goldens (" DIR "README.md)\n", e->name, layout, h, want);
    t_failed++;
    unlink(path);
    return -1;
}

static void run_entry(const ml_entry *e, const char *tmpdir) {
    char model[512], side_path[512];
    snprintf(side_path, sizeof side_path, "%.200s/%.63s-sidecar.gguf", tmpdir, e->name);
    if (!strcmp(e->model, "synth")) {
        snprintf(model, sizeof model, "%.200s/%.63s.gguf", tmpdir, e->name);
        if (synth_checked(e, e->layout, e->hash, model)) return;
        if (e->mtp >= 2 && synth_checked(e, e->mtp == 3 ? "dspark" : "mtp-only", e->side_hash, side_path)) { unlink(model); return; }
    } else {
        snprintf(model, sizeof model, "%s", t_shared(e->model));
    }
    int n = 0;
    int32_t *ids = read_ids(DIR "tokens-160.txt", &n);
    mr_model_params mp;
    mr_model_params_default(&mp);
    mp.n_threads = 1;
    mp.graph = MR_GRAPH_MAINLINE;
    mp.mtp = e->mtp != 0;
    mr_pager_model_info pi, si = {0};
    if (mr_pager_model_sizes(model, &pi) || pi.min_budget == 0 || (e->mtp >= 2 && mr_pager_model_sizes(side_path, &si))) {
        printf("FAIL %s: pager sizes: %s\n", e->name, mr_last_error());
        t_failed++;
    }
    for (int paged = 0; ids && paged < 2; paged++) {
        mp.ram_budget = paged ? pi.min_budget : 0;
        mr_model *m = mr_model_load(model, &mp), *side = NULL;
        if (m && e->mtp >= 2) {
            mp.ram_budget = paged ? si.min_budget : 0;
            if (!(side = mr_model_load(side_path, &mp)) || mr_model_draft_attach(m, side)) { mr_model_free(side); mr_model_free(m); m = side = NULL; }
        }
        if (!m) { printf("FAIL %s: %s\n", e->name, mr_last_error()); t_failed++; continue; }
        const int V = mr_model_n_vocab(m);
        for (int d = 0; d < 2; d++) {
            const char *path = d ? "decode" : "prefill";
            float *lg = eval_ids(m, ids, n, d);
            char why[512];
            mr_logits_cmp c;
            if (!lg) { printf("FAIL %s.%s: eval: %s\n", e->name, path, mr_last_error()); t_failed++; continue; }
            if (check(e->golden, path, lg, n, V, e->cls, why, sizeof why, &c)) {
                printf("ok %s.%s.%s [%s] %s\n", e->name, path, paged ? "paged" : "resident", e->cls, why);
                t_passed++;
            } else {
                printf("FAIL %s.%s.%s [%s]: %s\n", e->name, path, paged ? "paged" : "resident", e->cls, why);
                t_failed++;
            }
            free(lg);
        }
        if (e->mtp) check_mtp(e, m, side, ids, n, paged);
        mr_model_free(side);
        mr_pager_stats ps;
        if (paged && (mr_model_pager_stats(m, &ps) || !ps.paging || ps.misses == 0)) {
            printf("FAIL %s.paged: the pager did not page (budget %llu)\n", e->name, (unsigned long long)pi.min_budget);
            t_failed++;
        }
        mr_model_free(m);
    }
    /* the official graph (FP8 KV rows) is not mainline's: it must fail the strict class here */
    mp.ram_budget = 0;
    mp.graph = MR_GRAPH_OFFICIAL;
    mr_model *m = ids ? mr_model_load(model, &mp) : NULL;
    float *lg = m ? eval_ids(m, ids, n, 0) : NULL;
    char why[512];
    mr_logits_cmp c;
    if (!lg) { printf("FAIL %s.official: %s\n", e->name, mr_last_error()); t_failed++; }
    else if (check(e->golden, "prefill", lg, n, mr_model_n_vocab(m), "strict", why, sizeof why, &c)) {
        printf("FAIL %s.official: the official graph matches mainline strictly (%s)\n", e->name, why);
        t_failed++;
    } else {
        printf("ok %s.official differs from mainline: KL max %.3g median %.3g\n", e->name, c.kl_max, c.kl_median);
        t_passed++;
    }
    free(lg);
    mr_model_free(m);
    free(ids);
    if (!strcmp(e->model, "synth")) unlink(model);
    if (e->mtp >= 2) unlink(side_path);
}

int main(void) {
    (void)t_case_name; /* results are counted per entry and path, not through RUN */
    (void)t_case_failed;
    ml_entry e[16];
    int n = read_manifest(e, 16);
    if (n <= 0) { printf("FAIL manifest: cannot read " DIR "manifest.tsv\n"); return 1; }
    char tmpdir[] = "/tmp/mr-ds4ml-XXXXXX";
    if (!mkdtemp(tmpdir)) { printf("FAIL tmpdir\n"); return 1; }
    for (int i = 0; i < n; i++) run_entry(&e[i], tmpdir);
    rmdir(tmpdir);
    return t_finish();
}
