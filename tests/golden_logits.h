/* Helpers for checking an engine against shared/golden logits (tests only; header-only).
 *   tg_manifest()        entries of golden/manifest.tsv
 *   tg_eval()            run a model on token ids as one batch (prefill) or one at a time (decode)
 *   tg_check_golden()    compare with golden/logits/NAME.{prefill,decode}.lgts by tolerance class
 * Use: for each entry, tg_check_golden(entry, decode, &c, why) -> 1 pass, 0 fail, -1 error (why says). */
#ifndef MR_TEST_GOLDEN_LOGITS_H
#define MR_TEST_GOLDEN_LOGITS_H
#include "moerun_tools.h"
#include "test.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { char model[128], tokens[128], cls[32]; } tg_entry;

/* reads up to max entries; returns the count (or -1 if the manifest is missing) */
static int tg_manifest(tg_entry *e, int max) {
    FILE *f = fopen(t_shared("golden/manifest.tsv"), "r");
    if (!f) return -1;
    char line[512];
    int n = 0;
    while (n < max && fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        if (sscanf(line, "%127s %127s %31s", e[n].model, e[n].tokens, e[n].cls) == 3) n++;
    }
    fclose(f);
    return n;
}

/* comma-separated ids from golden/FILE; malloc'd */
static int32_t *tg_read_ids(const char *tokfile, int *n) {
    char rel[256];
    snprintf(rel, sizeof rel, "golden/%.200s", tokfile);
    FILE *f = fopen(t_shared(rel), "r");
    if (!f) return NULL;
    int cap = 512, k = 0;
    int32_t *v = malloc(sizeof(int32_t) * (size_t)cap);
    long x;
    while (v && fscanf(f, " %ld ,", &x) == 1) {
        if (k == cap) { cap *= 2; int32_t *nv = realloc(v, sizeof(int32_t) * (size_t)cap); if (!nv) { free(v); v = NULL; break; } v = nv; }
        v[k++] = (int32_t)x;
    }
    fclose(f);
    *n = k;
    return v;
}

/* logits [n][n_vocab] (malloc'd) of ids evaluated as one batch (decode = 0) or one by one */
static float *tg_eval(mr_model *m, const int32_t *ids, int n, int decode) {
    const int V = mr_model_n_vocab(m);
    float *lg = malloc(sizeof(float) * (size_t)n * (size_t)V);
    mr_session *s = mr_session_new(m, n);
    if (!lg || !s) { free(lg); mr_session_free(s); return NULL; }
    int rc = 0;
    if (decode) { for (int i = 0; i < n && !rc; i++) rc = mr_session_eval(s, ids + i, 1, lg + (size_t)i * V, 0); }
    else rc = mr_session_eval(s, ids, n, lg, 1);
    mr_session_free(s);
    if (rc) { free(lg); return NULL; }
    return lg;
}

/* Compare engine logits eng[n][V] (all positions) with the golden file's kept rows. */
static int tg_compare_file(const char *lgts_rel, const float *eng, int n, int V, mr_logits_cmp *c, char *why, size_t wl) {
    int nr, nv;
    int32_t *pos;
    float *ref;
    if (mr_lgts_read(t_shared(lgts_rel), &nr, &nv, &pos, &ref)) { snprintf(why, wl, "%s", mr_last_error()); return -1; }
    int rc = -1;
    float *sel = malloc(sizeof(float) * (size_t)(nr ? nr : 1) * (size_t)nv);
    if (nv != V) { snprintf(why, wl, "%s: n_vocab %d, engine %d", lgts_rel, nv, V); goto out; }
    if (!sel) { snprintf(why, wl, "out of memory"); goto out; }
    for (int r = 0; r < nr; r++) {
        if (pos[r] < 0 || pos[r] >= n) { snprintf(why, wl, "%s: position %d outside the %d tokens", lgts_rel, pos[r], n); goto out; }
        memcpy(sel + (size_t)r * nv, eng + (size_t)pos[r] * V, sizeof(float) * (size_t)nv);
    }
    rc = mr_logits_compare(ref, sel, nr, nv, c);
out:
    free(sel); free(pos); free(ref);
    return rc;
}

/* Runs entry e (prefill or decode) and checks its class. Returns 1 pass, 0 fail, -1 error. */
static int tg_check_golden(const tg_entry *e, const mr_model_params *mp, int decode, mr_logits_cmp *c, char *why, size_t wl) {
    char rel[256];
    snprintf(rel, sizeof rel, "models/%.200s.gguf", e->model);
    mr_model *m = mr_model_load(t_shared(rel), mp);
    if (!m) { snprintf(why, wl, "load: %s", mr_last_error()); return -1; }
    int n = 0;
    int32_t *ids = tg_read_ids(e->tokens, &n);
    float *lg = ids ? tg_eval(m, ids, n, decode) : NULL;
    int rc = -1;
    if (!ids) snprintf(why, wl, "cannot read %s", e->tokens);
    else if (!lg) snprintf(why, wl, "eval: %s", mr_last_error());
    else {
        snprintf(rel, sizeof rel, "golden/logits/%.200s.%s.lgts", e->model, decode ? "decode" : "prefill");
        if (tg_compare_file(rel, lg, n, mr_model_n_vocab(m), c, why, wl) == 0)
            rc = mr_logits_check_class(e->cls, c, why, wl);
    }
    free(lg); free(ids);
    mr_model_free(m);
    return rc;
}
#endif
