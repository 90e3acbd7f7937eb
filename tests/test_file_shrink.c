/* The model file changing under the process (docs/RELIABILITY.md). On a private copy of
 * tiny-qwen3moe:
 * - load: a file cut short of its last tensor's data is refused with a message (every tensor's
 *   extent is checked against the file size);
 * - eval: once the file shrank, mr_session_eval and mr_sessions_eval fail with a message naming
 *   the file and both sizes (resident and paged), instead of touching the lost pages;
 * - pager: a read of an expert past the new end of the file is an error naming the expert, its
 *   offset and the file, not garbage or a wait that never ends;
 * - the opt-in SIGBUS guard: in a child process, touching a mapped tensor past the new end writes
 *   one line naming the file and exits with MR_EXIT_FILE_SHRANK; a bus error outside any model
 *   mapping still ends the process as a bus error would (not with the guard's status). */
#include "test.h"
#include "moerun.h"
#include "gguf/gguf.h"
#include "model/model.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char copy_path[256];

/* a fresh private copy of the model; 0 or -1 */
static int make_copy(void) {
    const char *src = t_shared("models/tiny-qwen3moe.gguf");
    snprintf(copy_path, sizeof copy_path, "/tmp/moerun-shrink-%d.gguf", (int)getpid());
    int in = open(src, O_RDONLY), out = open(copy_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    char buf[1 << 16];
    ssize_t r = 0;
    while (in >= 0 && out >= 0 && (r = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, (size_t)r) != r) { r = -1; break; }
    if (in >= 0) close(in);
    if (out >= 0) close(out);
    return in >= 0 && out >= 0 && r == 0 ? 0 : -1;
}

static uint64_t file_size(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 ? (uint64_t)st.st_size : 0;
}

static mr_model *load(uint64_t budget) {
    mr_model_params mp;
    mr_model_params_default(&mp);
    mp.n_threads = 1;
    mp.n_ctx = 32;
    mp.ram_budget = budget;
    return mr_model_load(copy_path, &mp);
}

static void test_load_truncated(void) {
    CHECK(make_copy() == 0, "cannot copy the model to %s", copy_path);
    const uint64_t size = file_size(copy_path);
    CHECK(truncate(copy_path, (off_t)size - 1) == 0, "truncate");
    mr_model *m = load(0);
    CHECK(!m && strstr(mr_last_error(), "extends past the end of the file"), "one byte short: %s",
          m ? "loaded" : mr_last_error());
    mr_model_free(m);
    CHECK(truncate(copy_path, 4096) == 0, "truncate");
    m = load(0);
    CHECK(!m && mr_last_error()[0], "cut to 4096 bytes: %s", m ? "loaded" : "no message");
    mr_model_free(m);
    unlink(copy_path);
}

/* evaluate, shrink the file, evaluate again: the second eval must fail with the shrink message */
static void eval_then_shrink(uint64_t budget, const char *what) {
    CHECK(make_copy() == 0, "cannot copy the model to %s", copy_path);
    mr_model *m = load(budget);
    CHECK(m != NULL, "%s: %s", what, mr_last_error());
    if (!m) return;
    mr_session *s = mr_session_new(m, 32);
    const int32_t toks[3] = {1, 100, 200};
    float *l = malloc(sizeof(float) * (size_t)mr_model_n_vocab(m) * 3);
    CHECK(s && l && mr_session_eval(s, toks, 3, l, 0) == 0, "%s: %s", what, mr_last_error());
    const uint64_t size = file_size(copy_path);
    CHECK(truncate(copy_path, (off_t)(size / 2)) == 0, "truncate");
    int rc = mr_session_eval(s, toks, 1, l, 0);
    char want[64];
    snprintf(want, sizeof want, "to %llu bytes", (unsigned long long)(size / 2));
    CHECK(rc == -1 && strstr(mr_last_error(), "shrank") && strstr(mr_last_error(), copy_path) && strstr(mr_last_error(), want),
          "%s: eval after the shrink: rc %d, '%s'", what, rc, mr_last_error());
    if (mr_model_can_batch(m)) {
        mr_session *ss[3] = {s, s, s};
        rc = mr_sessions_eval(ss, toks, 3, l);
        CHECK(rc == -1 && strstr(mr_last_error(), "shrank"), "%s: batched eval after the shrink: rc %d, '%s'", what, rc,
              mr_last_error());
    }
    CHECK(mr_model_check_files(m) == -1, "%s: check_files passes after the shrink", what);
    free(l);
    mr_session_free(s);
    mr_model_free(m);
    unlink(copy_path);
}

static void test_eval_after_shrink(void) {
    mr_pager_model_info info;
    CHECK(mr_pager_model_sizes(t_shared("models/tiny-qwen3moe.gguf"), &info) == 0, "%s", mr_last_error());
    eval_then_shrink(0, "resident");
    eval_then_shrink(info.min_budget, "paged at the floor");
}

/* the pager itself, past the check: experts read from a file cut before the first expert's data */
static void test_pager_short_read(void) {
    CHECK(make_copy() == 0, "cannot copy the model to %s", copy_path);
    mr_pager_model_info info;
    CHECK(mr_pager_model_sizes(copy_path, &info) == 0, "%s", mr_last_error());
    mr_model *m = load(info.min_budget);
    CHECK(m && m->pager && mr_pager_paging(m->pager), "paged load: %s", mr_last_error());
    if (!m || !m->pager) { mr_model_free(m); return; }
    int layer = -1;
    uint64_t first = UINT64_MAX;
    for (int l = 0; l < m->n_layer; l++)
        for (int k = 0; k < MR_PAGER_MATS; k++) {
            const mr_gguf_tensor *t = m->exp_layers[l].mat[k];
            if (!t) continue;
            if (layer < 0) layer = l;
            if (t->file_offset < first) first = t->file_offset;
        }
    CHECK(layer >= 0 && first < file_size(copy_path), "no routed experts found");
    CHECK(truncate(copy_path, (off_t)first) == 0, "truncate");
    const int ids[2] = {0, 1};
    const void *ptrs[MR_PAGER_MATS];
    int rc = mr_pager_prefetch(m->pager, layer, ids, 2);
    if (rc == 0) rc = mr_pager_get(m->pager, layer, 0, ptrs);
    CHECK(rc == -1 && strstr(mr_last_error(), "short read of expert") && strstr(mr_last_error(), copy_path),
          "read past the new end: rc %d, '%s'", rc, mr_last_error());
    mr_pager_release(m->pager, layer);
    /* the model's eval reports the shrink before any read */
    mr_session *s = mr_session_new(m, 32);
    const int32_t tok = 1;
    CHECK(s && mr_session_eval(s, &tok, 1, NULL, 0) == -1 && strstr(mr_last_error(), "shrank"), "eval: '%s'",
          mr_last_error());
    mr_session_free(s);
    mr_model_free(m);
    unlink(copy_path);
}

/* run fn in a child with stderr into a file; returns the wait status, the stderr text in err */
static int in_child(void (*fn)(void), char *err, size_t cap) {
    char ep[300];
    snprintf(ep, sizeof ep, "%s.err", copy_path);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(ep, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) dup2(fd, 2);
        fn();
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    err[0] = 0;
    FILE *f = fopen(ep, "r");
    if (f) { size_t n = fread(err, 1, cap - 1, f); err[n] = 0; fclose(f); }
    unlink(ep);
    return st;
}

static volatile unsigned char sink;

static void child_guarded(void) {
    if (mr_file_guard_install()) _exit(2);
    mr_gguf *g = mr_gguf_open(copy_path);
    if (!g) _exit(3);
    const mr_gguf_tensor *last = mr_gguf_tensor_at(g, 0);
    for (uint64_t i = 1; i < mr_gguf_n_tensors(g); i++)
        if (mr_gguf_tensor_at(g, i)->file_offset > last->file_offset) last = mr_gguf_tensor_at(g, i);
    if (truncate(copy_path, 4096)) _exit(4);
    sink = ((const unsigned char *)last->data)[0]; /* a page past the new end: SIGBUS */
    _exit(5);
}

static void child_unguarded(void) {
    if (mr_file_guard_install()) _exit(2);
    char p[300];
    snprintf(p, sizeof p, "%s.other", copy_path);
    int fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || ftruncate(fd, 65536)) _exit(3);
    const unsigned char *m = mmap(NULL, 65536, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED || ftruncate(fd, 0)) _exit(4);
    unlink(p);
    sink = m[8192];
    _exit(5);
}

static void test_sigbus_guard(void) {
    CHECK(make_copy() == 0, "cannot copy the model to %s", copy_path);
    char err[2048];
    int st = in_child(child_guarded, err, sizeof err);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == MR_EXIT_FILE_SHRANK, "guarded bus error: status 0x%x, stderr '%s'", st, err);
    CHECK(strstr(err, "moerun: fatal: bus error reading ") && strstr(err, copy_path) && strstr(err, "shrank while mapped") &&
          strstr(err, "4096 now"), "message: '%s'", err);
    st = in_child(child_unguarded, err, sizeof err);
    /* killed by SIGBUS (under ASan: its own report and exit status); never the guard's status */
    CHECK((WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS) ||
              (WIFEXITED(st) && WEXITSTATUS(st) != MR_EXIT_FILE_SHRANK && WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 5 &&
               strstr(err, "BUS")),
          "bus error outside the model: status 0x%x, stderr '%s'", st, err);
    CHECK(!strstr(err, "moerun: fatal"), "the guard claimed a foreign bus error: '%s'", err);
    unlink(copy_path);
}

int main(void) {
    RUN(test_load_truncated);
    RUN(test_eval_after_shrink);
    RUN(test_pager_short_read);
    RUN(test_sigbus_guard);
    return t_finish();
}
