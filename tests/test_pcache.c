/* The prompt cache (mr_pcache_*, docs/SNAPSHOTS.md) on a synthesized qwen35moe (its recurrent state
 * cannot be cut back: every reuse is a restore): snapshots at chosen positions, a prompt that diverges
 * after one of them continues from it with the logits of an evaluation from scratch; the RAM bound and
 * LRU; files found again by a new cache on the same directory (a restart); a corrupted file refused and
 * removed, a truncated one removed at the scan, another model's files left alone; the disk bound; a
 * directory that went away costs the files only. */
#include "moerun_tools.h"
#include "test.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[] = "/tmp/mr-pcache-XXXXXX";
static mr_model *M, *M2;
static int V;

static void make_ids(int32_t *ids, int n, uint32_t seed) {
    uint32_t x = seed * 2654435761u + 7u;
    for (int i = 0; i < n; i++) { x = x * 1664525u + 1013904223u; ids[i] = (int32_t)((x >> 8) % (uint32_t)V); }
}

/* logits of the last token of prompt[0..n) evaluated from scratch */
static int scratch_logits(const int32_t *p, int n, float *out) {
    mr_session *s = mr_session_new(M, 256);
    int rc = !s || mr_session_eval(s, p, n, out, 0);
    mr_session_free(s);
    return rc ? -1 : 0;
}

/* s holds prompt[0..have): evaluate the rest; its last logits equal the scratch ones */
static int continues_right(mr_session *s, const int32_t *p, int n) {
    float *a = malloc(sizeof(float) * (size_t)V), *b = malloc(sizeof(float) * (size_t)V);
    const int have = mr_session_n_past(s);
    int ok = a && b && have < n && mr_session_eval(s, p + have, n - have, a, 0) == 0 && scratch_logits(p, n, b) == 0 &&
             !memcmp(a, b, sizeof(float) * (size_t)V);
    free(a); free(b);
    return ok;
}

/* a session that evaluated p[0..n) with a store at each of at[] */
static mr_session *eval_storing(mr_pcache *c, const int32_t *p, int n, const int *at, int n_at) {
    mr_session *s = mr_session_new(M, 256);
    int pos = 0;
    for (int k = 0; s && k <= n_at; k++) {
        const int to = k < n_at ? at[k] : n;
        if (to > pos && mr_session_eval(s, p + pos, to - pos, NULL, 0)) { mr_session_free(s); return NULL; }
        pos = to;
        if (k < n_at && mr_pcache_store(c, s, p)) { mr_session_free(s); return NULL; }
    }
    return s;
}

static int n_files(void) {
    DIR *d = opendir(tmpdir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

static uint64_t dir_bytes(void) {
    DIR *d = opendir(tmpdir);
    uint64_t n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        char p[600];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
        if (e->d_name[0] != '.' && !stat(p, &sb)) n += (uint64_t)sb.st_size;
    }
    if (d) closedir(d);
    return n;
}

static void first_file(char *out, size_t n) {
    DIR *d = opendir(tmpdir);
    out[0] = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.') { snprintf(out, n, "%s/%s", tmpdir, e->d_name); break; }
    if (d) closedir(d);
}

static int32_t P1[64], P2[64], P3[64];

static void test_ram_divergence(void) {
    mr_pcache_params pp = {.ram_bytes = 64u << 20};
    mr_pcache *c = mr_pcache_new(M, &pp);
    const int at[] = {20, 40};
    mr_session *a = c ? eval_storing(c, P1, 60, at, 2) : NULL;
    CHECK(a, "%s", mr_last_error());
    mr_session *s = mr_session_new(M, 256);
    /* P2 shares P1's first 30 tokens: the snapshot at 20 is the longest at or before the divergence */
    int n = mr_pcache_restore(c, s, P2, 63, 0);
    CHECK(n == 20 && mr_session_n_past(s) == 20, "restored %d: %s", n, mr_last_error());
    CHECK(continues_right(s, P2, 64), "P2 after the restore differs from scratch");
    /* a slot that holds 25 of P2 already gets nothing better from the cache */
    CHECK(mr_pcache_restore(c, s, P2, 63, 25) == 0, "min_len");
    /* P1 again: the snapshot at 40 */
    CHECK(mr_pcache_restore(c, s, P1, 59, 0) == 40 && continues_right(s, P1, 60), "P1 from 40");
    CHECK(mr_pcache_restore(c, s, P3, 63, 0) == 0, "P3 shares nothing");
    mr_pcache_stats st;
    mr_pcache_stats_get(c, &st);
    CHECK(st.hits == 2 && st.misses == 2 && st.tokens_restored == 60 && st.n_ram == 2 && st.stores == 2, "hits %llu misses %llu restored %llu n_ram %d",
          (unsigned long long)st.hits, (unsigned long long)st.misses, (unsigned long long)st.tokens_restored, st.n_ram);
    mr_session_free(a); mr_session_free(s);
    mr_pcache_free(c);
}

static void test_ram_lru(void) {
    mr_session *probe = mr_session_new(M, 256);
    mr_session_eval(probe, P1, 40, NULL, 0);
    const size_t one = mr_session_save_size(probe, 1);
    mr_session_free(probe);
    /* room for two of the three snapshots */
    mr_pcache_params pp = {.ram_bytes = 2 * one + one / 2};
    mr_pcache *c = mr_pcache_new(M, &pp);
    const int at1[] = {40}, at2[] = {41}, at3[] = {42};
    mr_session *a = eval_storing(c, P1, 50, at1, 1), *b = eval_storing(c, P2, 50, at2, 1);
    mr_session *s = mr_session_new(M, 256);
    CHECK(mr_pcache_restore(c, s, P1, 60, 0) == 40, "P1"); /* P1's is now used more recently than P2's */
    mr_session *d = eval_storing(c, P3, 50, at3, 1);
    mr_pcache_stats st;
    mr_pcache_stats_get(c, &st);
    CHECK(st.ram_bytes <= pp.ram_bytes && st.n_ram == 2 && st.evictions == 1, "ram %llu of %llu, n_ram %d, evictions %llu",
          (unsigned long long)st.ram_bytes, (unsigned long long)pp.ram_bytes, st.n_ram, (unsigned long long)st.evictions);
    CHECK(mr_pcache_restore(c, s, P2, 60, 0) == 0, "P2's was the least recently used and went");
    CHECK(mr_pcache_restore(c, s, P1, 60, 0) == 40 && mr_pcache_restore(c, s, P3, 60, 0) == 42, "P1 and P3 stay");
    mr_session_free(a); mr_session_free(b); mr_session_free(d); mr_session_free(s);
    mr_pcache_free(c);
}

static void test_disk_restart(void) {
    mr_pcache_params pp = {.ram_bytes = 64u << 20, .dir = tmpdir};
    mr_pcache *c = mr_pcache_new(M, &pp);
    const int at[] = {20, 40};
    mr_session *a = c ? eval_storing(c, P1, 60, at, 2) : NULL;
    CHECK(a && n_files() == 2, "%d files: %s", n_files(), mr_last_error());
    mr_session_free(a);
    mr_pcache_free(c);
    /* a restart: no RAM copies, the files are found */
    pp.ram_bytes = 0;
    c = mr_pcache_new(M, &pp);
    mr_pcache_stats st;
    mr_pcache_stats_get(c, &st);
    CHECK(st.n_disk == 2 && st.n_ram == 0 && st.disk_bytes == dir_bytes(), "n_disk %d", st.n_disk);
    mr_session *s = mr_session_new(M, 256);
    CHECK(mr_pcache_restore(c, s, P2, 63, 0) == 20 && continues_right(s, P2, 64), "P2 from the file at 20");
    CHECK(mr_pcache_restore(c, s, P1, 59, 0) == 40 && continues_right(s, P1, 60), "P1 from the file at 40");
    mr_pcache_stats_get(c, &st);
    CHECK(st.disk_reads == 2 && st.bad_files == 0, "disk reads %llu", (unsigned long long)st.disk_reads);
    mr_session_free(s);
    mr_pcache_free(c);
    /* another model's cache in the same directory: it sees none of these and removes none */
    c = mr_pcache_new(M2, &pp);
    mr_pcache_stats_get(c, &st);
    CHECK(c && st.n_disk == 0 && n_files() == 2, "foreign model: n_disk %d, %d files", st.n_disk, n_files());
    mr_pcache_free(c);
}

static void test_disk_bad(void) {
    mr_pcache_params pp = {.dir = tmpdir};
    char path[600];
    /* flip a byte in the body of one file: the scan takes it (its header is fine), the restore refuses
     * it, removes it and leaves the session empty */
    first_file(path, sizeof path);
    struct stat sb;
    CHECK(path[0] && !stat(path, &sb), "a file from the last case");
    FILE *f = fopen(path, "r+b");
    if (f) { fseek(f, sb.st_size - 100, SEEK_SET); int ch = fgetc(f); fseek(f, sb.st_size - 100, SEEK_SET); fputc(ch ^ 4, f); fclose(f); }
    mr_pcache *c = mr_pcache_new(M, &pp);
    mr_session *s = mr_session_new(M, 256);
    int got1 = mr_pcache_restore(c, s, P1, 59, 0);
    int got2 = got1 < 0 ? mr_pcache_restore(c, s, P1, 59, 0) : mr_pcache_restore(c, s, P2, 63, 0);
    /* one of the two was the bad one: refused once, then the other (or nothing) */
    mr_pcache_stats st;
    mr_pcache_stats_get(c, &st);
    CHECK((got1 == -1 || got2 == -1) && st.bad_files == 1 && n_files() == 1 && access(path, F_OK) != 0,
          "got %d %d, bad %llu, %d files", got1, got2, (unsigned long long)st.bad_files, n_files());
    CHECK(got1 != -1 || (got2 == 20 && continues_right(s, P1, 60)), "after the refusal the 20-token one serves P1");
    mr_pcache_free(c);
    /* a truncated file is removed by the scan */
    first_file(path, sizeof path);
    CHECK(path[0] && truncate(path, 500) == 0, "truncate");
    c = mr_pcache_new(M, &pp);
    mr_pcache_stats_get(c, &st);
    CHECK(st.n_disk == 0 && st.bad_files == 1 && n_files() == 0, "n_disk %d bad %llu files %d", st.n_disk, (unsigned long long)st.bad_files, n_files());
    /* the directory goes away: stores still answer, from RAM only when there is RAM */
    mr_pcache_free(c);
    rmdir(tmpdir);
    pp.ram_bytes = 64u << 20;
    c = mr_pcache_new(M, &pp);
    rmdir(tmpdir);
    const int at[] = {20};
    mr_session *a = c ? eval_storing(c, P1, 30, at, 1) : NULL;
    mr_pcache_stats_get(c, &st);
    CHECK(a && st.n_ram == 1 && st.n_disk == 0, "store without a directory: %s", mr_last_error());
    CHECK(mr_pcache_restore(c, s, P1, 29, 0) == 20, "from RAM");
    mkdir(tmpdir, 0700);
    mr_session_free(a); mr_session_free(s);
    mr_pcache_free(c);
}

static void test_disk_bound(void) {
    mr_session *probe = mr_session_new(M, 256);
    mr_session_eval(probe, P1, 40, NULL, 0);
    const size_t one = mr_session_save_size(probe, 1);
    mr_session_free(probe);
    mr_pcache_params pp = {.dir = tmpdir, .disk_bytes = 2 * one + one / 2};
    mr_pcache *c = mr_pcache_new(M, &pp);
    const int at[] = {40};
    for (int k = 0; k < 4; k++) {
        int32_t p[64];
        make_ids(p, 64, 100 + (uint32_t)k);
        mr_session *a = eval_storing(c, p, 45, at, 1);
        CHECK(a, "%s", mr_last_error());
        mr_session_free(a);
    }
    mr_pcache_stats st;
    mr_pcache_stats_get(c, &st);
    CHECK(n_files() == 2 && dir_bytes() <= pp.disk_bytes && st.disk_bytes == dir_bytes() && st.n_entries == 2,
          "%d files, %llu bytes of %llu", n_files(), (unsigned long long)dir_bytes(), (unsigned long long)pp.disk_bytes);
    mr_pcache_free(c);
}

int main(void) {
    if (!mkdtemp(tmpdir)) { printf("FAIL tmpdir\n"); return 1; }
    char p1[600], p2[600];
    snprintf(p1, sizeof p1, "%s.a.gguf", tmpdir);
    snprintf(p2, sizeof p2, "%s.b.gguf", tmpdir);
    mr_synth_params sp = {.shape = "qwen35moe-tiny", .mix = "f32", .seed = 1};
    mr_synth_params sp2 = {.shape = "qwen35moe-tiny", .mix = "f32", .seed = 2};
    mr_model_params mp;
    mr_model_params_default(&mp);
    mp.n_threads = 2;
    if (mr_synth(p1, &sp) || mr_synth(p2, &sp2) || !(M = mr_model_load(p1, &mp)) || !(M2 = mr_model_load(p2, &mp))) {
        printf("FAIL setup: %s\n", mr_last_error());
        return 1;
    }
    V = mr_model_n_vocab(M);
    make_ids(P1, 64, 1);
    memcpy(P2, P1, 30 * sizeof(int32_t));
    make_ids(P2 + 30, 34, 2);
    make_ids(P3, 64, 3);
    RUN(test_ram_divergence);
    RUN(test_ram_lru);
    RUN(test_disk_restart);
    RUN(test_disk_bad);
    RUN(test_disk_bound);
    mr_model_free(M);
    mr_model_free(M2);
    unlink(p1); unlink(p2);
    DIR *d = opendir(tmpdir);
    for (struct dirent *e; d && (e = readdir(d));) {
        char p[600];
        snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
        if (e->d_name[0] != '.' || strlen(e->d_name) > 2) unlink(p);
    }
    if (d) closedir(d);
    rmdir(tmpdir);
    return t_finish();
}
