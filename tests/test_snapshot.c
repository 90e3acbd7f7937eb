/* Session snapshots (mr_session_save / mr_session_restore, docs/SNAPSHOTS.md) on every architecture:
 * a prefix is evaluated (a batch, then decode steps, so the compressor and recurrent states are in the
 * middle of a block), saved, the session goes on with other tokens, the snapshot is restored and a
 * continuation (a batch, then decode steps) is evaluated: its logits must be the bits of the same
 * continuation evaluated without the interruption. The same from a file into a fresh session of a
 * larger context, and from the resident model into the paged one (smallest legal budget) and back.
 * Then what must be refused: a flipped byte in the body or the header, a truncated or padded buffer or
 * file, another format version, another model of the same shape, a session whose context is too small;
 * after each refusal the session is empty and a good snapshot still restores. */
#include "moerun_tools.h"
#include "base/hash.h"
#include "test.h"

#include <dirent.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    const char *name;
    const char *shared;            /* model under ../shared/models, or NULL: synthesized */
    const char *shape;             /* synth shape */
    unsigned long long seed;
    int prefix;                    /* positions before the snapshot */
} snap_case;

enum { N_DIVERGE = 21, N_CONT_BATCH = 5, N_CONT_DECODE = 3, N_CONT = N_CONT_BATCH + N_CONT_DECODE };

static char tmpdir[] = "/tmp/mr-snapshot-XXXXXX";

static void make_ids(int32_t *ids, int n, int V, uint32_t seed) {
    uint32_t x = seed * 2654435761u + 12345u;
    for (int i = 0; i < n; i++) { x = x * 1664525u + 1013904223u; ids[i] = (int32_t)((x >> 8) % (uint32_t)V); }
}

/* n tokens as one batch of n - n_decode, then n_decode single steps; logits [n][V] if lg */
static int eval_mixed(mr_session *s, const int32_t *ids, int n, int n_decode, float *lg, int V) {
    const int nb = n - n_decode;
    if (nb > 0 && mr_session_eval(s, ids, nb, lg, lg != NULL)) return -1;
    for (int i = nb; i < n; i++)
        if (mr_session_eval(s, ids + i, 1, lg ? lg + (size_t)i * V : NULL, 0)) return -1;
    return 0;
}

typedef struct {
    mr_model *m;
    int V, P;
    int32_t *prefix, *cont, *other;
    float *ref;            /* [N_CONT][V]: the continuation after the prefix, uninterrupted */
} fixture;

/* the continuation in s (which holds the prefix by now) equals the reference, bit for bit */
static int cont_matches(const fixture *f, mr_session *s, const char *what, const char *name) {
    float *lg = malloc(sizeof(float) * N_CONT * (size_t)f->V);
    int ok = lg && eval_mixed(s, f->cont, N_CONT, N_CONT_DECODE, lg, f->V) == 0;
    if (!ok) printf("    %s/%s: eval failed: %s\n", name, what, mr_last_error());
    else if (memcmp(lg, f->ref, sizeof(float) * N_CONT * (size_t)f->V)) {
        ok = 0;
        printf("    %s/%s: the logits after the restore differ from the uninterrupted run\n", name, what);
    }
    free(lg);
    return ok;
}

static int refs_make(fixture *f, const snap_case *c) {
    f->V = mr_model_n_vocab(f->m);
    f->P = c->prefix;
    f->prefix = malloc(sizeof(int32_t) * (size_t)f->P);
    f->cont = malloc(sizeof(int32_t) * N_CONT);
    f->other = malloc(sizeof(int32_t) * N_DIVERGE);
    f->ref = malloc(sizeof(float) * N_CONT * (size_t)f->V);
    if (!f->prefix || !f->cont || !f->other || !f->ref) return -1;
    make_ids(f->prefix, f->P, f->V, 1);
    make_ids(f->cont, N_CONT, f->V, 2);
    make_ids(f->other, N_DIVERGE, f->V, 3);
    mr_session *s = mr_session_new(f->m, f->P + N_CONT + N_DIVERGE);
    int rc = !s || eval_mixed(s, f->prefix, f->P, 3, NULL, f->V) || eval_mixed(s, f->cont, N_CONT, N_CONT_DECODE, f->ref, f->V);
    mr_session_free(s);
    return rc ? -1 : 0;
}

static void refs_free(fixture *f) { free(f->prefix); free(f->cont); free(f->other); free(f->ref); }

/* a session holding the prefix */
static mr_session *with_prefix(const fixture *f, int n_ctx) {
    mr_session *s = mr_session_new(f->m, n_ctx);
    if (s && eval_mixed(s, f->prefix, f->P, 3, NULL, f->V)) { mr_session_free(s); return NULL; }
    return s;
}

/* refused with a message containing `want`, leaving the session empty */
static int refused(int rc, mr_session *s, const char *want, const char *what, const char *name) {
    if (rc != -1 || mr_session_n_past(s) != 0 || !strstr(mr_last_error(), want)) {
        printf("    %s/%s: rc %d, n_past %d, error '%s' (wanted a refusal naming '%s')\n", name, what, rc,
               mr_session_n_past(s), mr_last_error(), want);
        return 0;
    }
    return 1;
}

static int write_file(const char *path, const void *p, size_t n) {
    FILE *fp = fopen(path, "wb");
    if (!fp) return -1;
    int rc = fwrite(p, 1, n, fp) == n ? 0 : -1;
    return fclose(fp) || rc ? -1 : 0;
}

/* the header's version field changed and the header's checksum made right again (layout in
 * src/model/snapshot.c: version at byte 8, the header hash at byte 88 over bytes [0, 88)) */
static void set_version(unsigned char *buf, uint32_t v) {
    memcpy(buf + 8, &v, 4);
    uint64_t h = mr_hash64(buf, 88, 0);
    memcpy(buf + 88, &h, 8);
}

/* save, diverge, restore, continue (buffer); file into a fresh, larger session; the refusals */
static void run_resident(fixture *f, mr_model *foreign, const char *name, char *snap_out, size_t *snap_n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.snap", tmpdir, name);
    int ok = 1;
    mr_session *s = with_prefix(f, f->P + N_CONT + N_DIVERGE);
    size_t n = s ? mr_session_save_size(s, 1) : 0;
    unsigned char *buf = n ? malloc(n) : NULL, *bad = n ? malloc(n + 1) : NULL;
    int32_t *toks = malloc(sizeof(int32_t) * (size_t)f->P);
    if (!s || !buf || !bad || !toks || mr_session_save(s, f->prefix, buf, n) || mr_session_save_file(s, f->prefix, path)) {
        printf("FAIL snapshot_%s: save: %s\n", name, mr_last_error());
        t_failed++;
        goto done;
    }
    if (eval_mixed(s, f->other, N_DIVERGE, 2, NULL, f->V)) { ok = 0; printf("    diverge: %s\n", mr_last_error()); }
    int rc = mr_session_restore(s, buf, n, toks, f->P);
    if (rc != f->P || mr_session_n_past(s) != f->P || memcmp(toks, f->prefix, sizeof(int32_t) * (size_t)f->P)) {
        ok = 0;
        printf("    %s/buffer: restore rc %d n_past %d: %s\n", name, rc, mr_session_n_past(s), mr_last_error());
    } else ok &= cont_matches(f, s, "buffer", name);
    mr_session *big = mr_session_new(f->m, 2 * (f->P + N_CONT));
    rc = big ? mr_session_restore_file(big, path, NULL, 0) : -1;
    if (rc != f->P) { ok = 0; printf("    %s/file: restore rc %d: %s\n", name, rc, mr_last_error()); }
    else ok &= cont_matches(f, big, "file", name);
    /* the directory holds the snapshot and nothing else (no temporary left behind) */
    DIR *d = opendir(tmpdir);
    for (struct dirent *e; d && (e = readdir(d));)
        if (strstr(e->d_name, ".tmp")) { ok = 0; printf("    %s: temporary %s left behind\n", name, e->d_name); }
    if (d) closedir(d);
    if (ok) { printf("ok snapshot_%s (prefix %d, %zu bytes; buffer and file, continued bit for bit)\n", name, f->P, n); t_passed++; }
    else { printf("FAIL snapshot_%s\n", name); t_failed++; }

    /* refusals; each leaves the session empty, and the good snapshot restores afterwards */
    ok = 1;
    mr_snapshot_info info;
    ok &= mr_snapshot_peek(buf, n, &info) == 0 && info.n_past == f->P && info.has_tokens && info.bytes == n &&
          info.model_id == mr_model_identity(f->m) && info.version == MR_SNAPSHOT_VERSION;
    memcpy(bad, buf, n);
    bad[n - n / 3] ^= 0x10;
    ok &= refused(mr_session_restore(s, bad, n, NULL, 0), s, "checksum", "flipped body byte", name);
    memcpy(bad, buf, n);
    bad[20] ^= 1;
    ok &= refused(mr_session_restore(s, bad, n, NULL, 0), s, "checksum", "flipped header byte", name);
    ok &= refused(mr_session_restore(s, buf, n - 1, NULL, 0), s, "truncated", "one byte short", name);
    ok &= refused(mr_session_restore(s, buf, 50, NULL, 0), s, "truncated", "half a header", name);
    memcpy(bad, buf, n);
    bad[n] = 0;
    ok &= refused(mr_session_restore(s, bad, n + 1, NULL, 0), s, "padded", "one byte long", name);
    memcpy(bad, buf, n);
    set_version(bad, MR_SNAPSHOT_VERSION + 1);
    ok &= refused(mr_session_restore(s, bad, n, NULL, 0), s, "version", "next version", name);
    memcpy(bad, buf, n);
    memcpy(bad, "ggufGGUF", 8);
    ok &= refused(mr_session_restore(s, bad, n, NULL, 0), s, "not a moerun snapshot", "magic", name);
    ok &= refused(mr_session_restore(s, buf, n, toks, f->P - 1), s, "room", "token room", name);
    mr_session *small = mr_session_new(f->m, f->P - 1);
    ok &= small && refused(mr_session_restore(small, buf, n, NULL, 0), small, "context", "small context", name);
    mr_session_free(small);
    mr_session *fs = foreign ? mr_session_new(foreign, f->P + N_CONT) : NULL;
    ok &= fs && mr_model_identity(foreign) != mr_model_identity(f->m) &&
          refused(mr_session_restore(fs, buf, n, NULL, 0), fs, "another model", "foreign model", name) &&
          refused(mr_session_restore_file(fs, path, NULL, 0), fs, "another model", "foreign model file", name);
    mr_session_free(fs);
    /* files: flipped, cut short, foreign-version; the missing one */
    char badpath[600];
    snprintf(badpath, sizeof badpath, "%s.bad", path);
    memcpy(bad, buf, n);
    bad[n / 2] ^= 0x80;
    ok &= write_file(badpath, bad, n) == 0 && refused(mr_session_restore_file(s, badpath, NULL, 0), s, "checksum", "flipped file", name);
    ok &= write_file(badpath, buf, n - 7) == 0 && refused(mr_session_restore_file(s, badpath, NULL, 0), s, "truncated", "short file", name);
    ok &= write_file(badpath, buf, 40) == 0 && refused(mr_session_restore_file(s, badpath, NULL, 0), s, "truncated", "header-short file", name);
    memcpy(bad, buf, n);
    set_version(bad, 0);
    ok &= write_file(badpath, bad, n) == 0 && refused(mr_session_restore_file(s, badpath, NULL, 0), s, "version", "old-version file", name);
    unlink(badpath);
    ok &= refused(mr_session_restore_file(s, badpath, NULL, 0), s, "cannot open", "missing file", name);
    /* after all that, the good one */
    ok &= mr_session_restore(s, buf, n, NULL, 0) == f->P && cont_matches(f, s, "after refusals", name);
    if (ok) { printf("ok snapshot_%s_refused (corrupted, truncated, padded, other version, foreign model, small context)\n", name); t_passed++; }
    else { printf("FAIL snapshot_%s_refused\n", name); t_failed++; }
    mr_session_free(big);
    if (snap_out && n <= *snap_n) { memcpy(snap_out, buf, n); *snap_n = n; }
    else if (snap_n) *snap_n = 0;
done:
    mr_session_free(s);
    free(buf); free(bad); free(toks);
    unlink(path);
}

/* the paged model: its own save/diverge/restore, and the resident model's snapshot continued here */
static void run_paged(fixture *f, const char *name, const void *res_snap, size_t res_n) {
    int ok = 1;
    mr_session *s = with_prefix(f, f->P + N_CONT + N_DIVERGE);
    size_t n = s ? mr_session_save_size(s, 0) : 0;
    unsigned char *buf = n ? malloc(n) : NULL;
    if (!buf || mr_session_save(s, NULL, buf, n)) { ok = 0; printf("    %s/paged: save: %s\n", name, mr_last_error()); }
    else {
        ok &= eval_mixed(s, f->other, N_DIVERGE, 2, NULL, f->V) == 0 && mr_session_restore(s, buf, n, NULL, 0) == f->P &&
              cont_matches(f, s, "paged", name);
        ok &= res_n > 0 && mr_session_restore(s, res_snap, res_n, NULL, 0) == f->P && cont_matches(f, s, "resident->paged", name);
    }
    mr_pager_stats ps;
    ok &= mr_model_pager_stats(f->m, &ps) == 0 && ps.paging && ps.misses > 0;
    if (ok) { printf("ok snapshot_%s_paged (%llu expert reads; own snapshot and the resident one)\n", name, (unsigned long long)ps.misses); t_passed++; }
    else { printf("FAIL snapshot_%s_paged: %s\n", name, mr_last_error()); t_failed++; }
    mr_session_free(s);
    free(buf);
}

static int model_path(const snap_case *c, unsigned long long seed, char *out, size_t n) {
    if (c->shared) { snprintf(out, n, "%s", t_shared(c->shared)); return access(out, R_OK); }
    snprintf(out, n, "%s/%s-%llu.gguf", tmpdir, c->shape, seed);
    mr_synth_params sp = {.shape = c->shape, .mix = "f32", .seed = seed};
    return mr_synth(out, &sp);
}

static void run_case(const snap_case *c, const snap_case *foreign_case) {
    char path[512], fpath[512];
    if (model_path(c, c->seed, path, sizeof path)) { printf("FAIL snapshot_%s: model: %s\n", c->name, mr_last_error()); t_failed++; return; }
    /* foreign: the same shape synthesized from another seed, or another shared model */
    int fok = foreign_case->shared ? model_path(foreign_case, 0, fpath, sizeof fpath) == 0
                                   : model_path(c, c->seed + 1, fpath, sizeof fpath) == 0;
    mr_model_params mp;
    mr_model_params_default(&mp);
    mp.n_threads = 2;
    fixture f = {0};
    f.m = mr_model_load(path, &mp);
    mr_model *foreign = fok ? mr_model_load(fpath, &mp) : NULL;
    if (!f.m || refs_make(&f, c)) { printf("FAIL snapshot_%s: %s\n", c->name, mr_last_error()); t_failed++; goto done; }
    size_t res_n = 64u << 20;
    char *res_snap = malloc(res_n);
    run_resident(&f, foreign, c->name, res_snap, &res_n);
    mr_pager_model_info pi;
    if (mr_pager_model_sizes(path, &pi) == 0 && pi.min_budget > 0) {
        mp.ram_budget = pi.min_budget;
        fixture g = f;
        g.m = mr_model_load(path, &mp);
        if (!g.m) { printf("FAIL snapshot_%s_paged: %s\n", c->name, mr_last_error()); t_failed++; }
        else run_paged(&g, c->name, res_snap, res_n);
        mr_model_free(g.m);
    }
    free(res_snap);
done:
    refs_free(&f);
    mr_model_free(f.m);
    mr_model_free(foreign);
    if (!c->shared) unlink(path);
    if (fok && !foreign_case->shared) unlink(fpath);
}

/* the checksum sees every single-bit change of a buffer, at every length up to 100 */
static void test_hash_flips(void) {
    unsigned char b[100];
    for (int i = 0; i < 100; i++) b[i] = (unsigned char)(i * 37);
    for (size_t n = 1; n <= sizeof b; n++) {
        const uint64_t h = mr_hash64(b, n, 0);
        CHECK(h == mr_hash64(b, n, 0) && h != mr_hash64(b, n, 1) && (n < 2 || h != mr_hash64(b, n - 1, 0)), "n %zu", n);
        for (size_t i = 0; i < n; i++)
            for (int bit = 0; bit < 8; bit++) {
                b[i] ^= (unsigned char)(1u << bit);
                CHECK(mr_hash64(b, n, 0) != h, "n %zu byte %zu bit %d", n, i, bit);
                b[i] ^= (unsigned char)(1u << bit);
            }
    }
}

int main(void) {
    RUN(test_hash_flips);
    if (!mkdtemp(tmpdir)) { printf("FAIL tmpdir\n"); return 1; }
    /* prefixes: deepseek4's pass the window ring (16 + 80 rows) and the ratio-128 block; the others
     * are odd so that nothing lines up with a block */
    static const snap_case cases[] = {
        {"llama", "models/tiny-llama.gguf", NULL, 0, 37},
        {"qwen3moe", "models/tiny-qwen3moe.gguf", NULL, 0, 37},
        {"deepseek4", "models/tiny-deepseek4.gguf", NULL, 0, 150},
        {"deepseek4_idx", "models/tiny-deepseek4-idx.gguf", NULL, 0, 103},
        {"deepseek2", NULL, "deepseek2-tiny", 1, 37},
        {"gpt_oss", NULL, "gpt-oss-tiny", 1, 37},
        {"glm4moe", NULL, "glm4moe-tiny", 1, 37},
        {"qwen35moe", NULL, "qwen35moe-tiny", 1, 37},
    };
    static const snap_case other_llama = {"llama-q8", "models/tiny-llama-q8_0.gguf", NULL, 0, 0};
    static const snap_case other_qwen = {"qwen3moe-q4", "models/tiny-qwen3moe-q4_k_m.gguf", NULL, 0, 0};
    static const snap_case other_ds4 = {"ds4-idx", "models/tiny-deepseek4-idx.gguf", NULL, 0, 0};
    static const snap_case other_ds4i = {"ds4", "models/tiny-deepseek4.gguf", NULL, 0, 0};
    const snap_case *foreign[] = {&other_llama, &other_qwen, &other_ds4, &other_ds4i, &cases[4], &cases[5], &cases[6], &cases[7]};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i], foreign[i]);
    rmdir(tmpdir);
    return t_finish();
}
