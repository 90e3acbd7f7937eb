/* Loading a model for a command (progress, Ctrl-C, summary, warnings) and tokenizing whole texts. */
#include "cli.h"
#include "moerun.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

mr_model *mr_cli_load(mr_cli_common *c, const char *tmpl, int *interrupted) {
    *interrupted = 0;
    if (c->budget && mr_ram_budget_parse(c->budget, c->model, c->mp.n_ctx, &c->mp.ram_budget)) {
        fprintf(stderr, "error: %s\n", mr_last_error());
        return NULL;
    }
    mr_cli_progress pr;
    mr_cli_progress_init(&pr, "load");
    c->mp.progress = mr_cli_progress_load;
    c->mp.progress_user = &pr;
    double t0 = mr_cli_now();
    mr_model *m = mr_model_load(c->model, &c->mp);
    mr_cli_progress_clear(&pr);
    c->mp.progress = NULL;
    if (!m) {
        *interrupted = mr_cli_interrupted != 0;
        fprintf(stderr, "error: %s\n", mr_last_error());
        return NULL;
    }
    if (mr_model_set_approx(m, &c->ap)) {
        fprintf(stderr, "error: %s\n", mr_last_error());
        mr_model_free(m);
        return NULL;
    }
    if (c->approx_path) {
        if (!(c->approx_file = mr_approx_file_open(c->approx_path))) {
            fprintf(stderr, "error: %s\n", mr_last_error());
            mr_model_free(m);
            return NULL;
        }
        mr_cli_approx_poll(c, m); /* a file already there applies from the start */
    }
    /* the summary: what was chosen, including what `auto` and the defaults resolved to */
    const int n_ctx = mr_model_n_ctx(m), train = mr_model_n_ctx_train(m);
    fprintf(stderr, "load: %.3f s (%s, %d threads, %d layers", mr_cli_now() - t0, mr_model_arch(m),
            mr_model_n_threads(m), mr_model_n_layer(m));
    fprintf(stderr, ", context %d of %d trained", n_ctx, train);
    if (tmpl) fprintf(stderr, ", template %s", tmpl);
    mr_pager_stats ps;
    if (mr_model_pager_stats(m, &ps) == 0 && ps.paging)
        fprintf(stderr, ", pager %d slots = %.1f MiB of %.1f MiB experts%s", ps.n_slots, ps.arena_bytes / 1048576.0,
                ps.expert_bytes / 1048576.0, c->budget && !strcmp(c->budget, "auto") ? " (auto)" : "");
    fprintf(stderr, ")\n");
    mr_cli_ep_join(m);
    if (train > 0 && n_ctx > train)
        fprintf(stderr, "warning: context %d is larger than the %d positions the model was trained on; "
                        "expect degraded output beyond %d\n", n_ctx, train, train);
    return m;
}

void mr_cli_ep_join(mr_model *m) {
    if (!mr_ep_active()) return;
    if (mr_ep_rank() > 0) { /* serve this rank's experts until rank 0 is done, then end here */
        int rc = mr_ep_serve(m);
        mr_model_free(m);
        mr_ep_stop();
        exit(rc ? 1 : 0);
    }
    mr_ep_attach(m);
    fprintf(stderr, "ep: %d ranks, rank 0 computes experts (layer + expert) %% %d == 0, the others serve the rest\n",
            mr_ep_size(), mr_ep_size());
}

int mr_cli_tokenize(const mr_tokenizer *t, const char *text, size_t len, int add_special, int parse_special,
                    int32_t **out) {
    *out = NULL;
    int n = mr_tokenize(t, text, len, add_special, parse_special, NULL, 0);
    if (n == INT_MIN) { fprintf(stderr, "error: tokenize: %s\n", mr_last_error()); return -1; }
    int need = n < 0 ? -n : n;
    *out = malloc(sizeof(int32_t) * (size_t)(need + 1));
    if (!*out) { fprintf(stderr, "error: out of memory\n"); return -1; }
    n = mr_tokenize(t, text, len, add_special, parse_special, *out, need + 1);
    if (n < 0) {
        fprintf(stderr, "error: tokenize: %s\n", n == INT_MIN ? mr_last_error() : "the token count changed");
        free(*out);
        *out = NULL;
        return -1;
    }
    return n;
}
