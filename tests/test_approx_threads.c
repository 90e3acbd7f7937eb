/* mr_model_set_approx from one thread while another evaluates the same model (docs/APPROX.md
 * "Switching while running"). On a freshly loaded model (no setting ever made, so nothing was set
 * up by an earlier call), a switching thread alternates the exact model and k=1 (plus the getters
 * and counters) while an evaluating thread runs 4-token prefills from position 0. Every eval must
 * give the logits of one of the two settings bit for bit: an eval never mixes two settings.
 * `make tsan` runs this test under ThreadSanitizer, which reports any unsynchronised access between
 * the two threads (before the fix the first enabled setting allocated the state the eval reads). */
#include "test.h"
#include "moerun.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#define NTOK 4
#define EVALS 48

static const int32_t toks[NTOK] = {1, 200, 300, 400};
static int n_vocab;
static float *ref_off, *ref_k1;
static atomic_int done_evals;

static mr_model *load(void) {
    mr_model_params mp;
    mr_model_params_default(&mp);
    mp.n_threads = 1;
    mp.n_ctx = 16;
    return mr_model_load(t_shared("models/kjv-moe-q8_0.gguf"), &mp);
}

static int eval_last(mr_session *s, float *out) {
    mr_session_reset(s);
    return mr_session_eval(s, toks, NTOK, out, 0);
}

typedef struct {
    mr_model *m;
    int bad, off, k1, err;
    char msg[256];
} eval_ctx;

static void *eval_thread(void *arg) {
    eval_ctx *c = arg;
    mr_session *s = mr_session_new(c->m, 16);
    float *l = malloc(sizeof(float) * (size_t)n_vocab);
    if (!s || !l) { c->err = 1; snprintf(c->msg, sizeof c->msg, "%s", mr_last_error()); goto done; }
    for (int i = 0; i < EVALS; i++) {
        if (eval_last(s, l)) { c->err = 1; snprintf(c->msg, sizeof c->msg, "%s", mr_last_error()); break; }
        if (!memcmp(l, ref_off, sizeof(float) * (size_t)n_vocab)) c->off++;
        else if (!memcmp(l, ref_k1, sizeof(float) * (size_t)n_vocab)) c->k1++;
        else c->bad++;
        atomic_fetch_add(&done_evals, 1);
    }
done:
    atomic_store(&done_evals, EVALS + 1);
    free(l);
    mr_session_free(s);
    return NULL;
}

static void test_switch_while_evaluating(void) {
    mr_model *a = load();
    CHECK(a != NULL, "%s", mr_last_error());
    if (!a) return;
    n_vocab = mr_model_n_vocab(a);
    ref_off = malloc(sizeof(float) * (size_t)n_vocab);
    ref_k1 = malloc(sizeof(float) * (size_t)n_vocab);
    mr_session *s = mr_session_new(a, 16);
    mr_approx_params k1, off, got;
    mr_approx_params_default(&off);
    mr_approx_params_default(&k1);
    CHECK(mr_approx_parse("k=1", &k1) == 0, "%s", mr_last_error());
    CHECK(s && ref_off && ref_k1 && eval_last(s, ref_off) == 0 && mr_model_set_approx(a, &k1) == 0 &&
          eval_last(s, ref_k1) == 0, "%s", mr_last_error());
    CHECK(memcmp(ref_off, ref_k1, sizeof(float) * (size_t)n_vocab) != 0, "k=1 gives the exact logits: the test cannot tell");
    mr_session_free(s);
    mr_model_free(a);

    mr_model *m = load(); /* fresh: no approximation was ever set on it */
    CHECK(m != NULL, "%s", mr_last_error());
    if (!m) return;
    eval_ctx c = {.m = m};
    pthread_t th;
    atomic_store(&done_evals, 0);
    CHECK(pthread_create(&th, NULL, eval_thread, &c) == 0, "pthread_create");
    int switches = 0, bad_set = 0;
    struct timespec pause = {0, 200000};
    while (atomic_load(&done_evals) <= EVALS) {
        const mr_approx_params *p = switches & 1 ? &off : &k1;
        if (mr_model_set_approx(m, p)) bad_set++;
        mr_model_get_approx(m, &got);
        if (memcmp(&got, p, sizeof got)) bad_set++;
        mr_approx_stats st;
        mr_model_approx_stats(m, &st);
        if (switches % 16 == 15) mr_model_approx_stats_reset(m);
        switches++;
        nanosleep(&pause, NULL);
    }
    pthread_join(th, NULL);
    printf("# %d evals: %d exact, %d k=1, %d neither; %d switches\n", c.off + c.k1 + c.bad, c.off, c.k1, c.bad, switches);
    CHECK(!c.err, "eval failed: %s", c.msg);
    CHECK(bad_set == 0, "%d set/get mismatches", bad_set);
    CHECK(c.bad == 0, "%d of %d evals gave logits of neither setting", c.bad, EVALS);
    CHECK(c.off + c.k1 == EVALS, "%d evals compared", c.off + c.k1);
    mr_model_free(m);
    free(ref_off);
    free(ref_k1);
}

int main(void) {
    RUN(test_switch_while_evaluating);
    return t_finish();
}
