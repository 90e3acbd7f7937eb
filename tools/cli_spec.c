/* Speculative-decoding flags shared by run, chat, bench and server (see cli.h). */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

void mr_cli_spec_default(mr_cli_spec *o) {
    memset(o, 0, sizeof *o);
    o->max = 0;
    o->ngram = 3;
}

int mr_cli_opt_spec(const char *opt, const char *v, void *dst) {
    mr_cli_spec *o = dst;
    if (!strcmp(opt, "--spec")) { if (!o->max) o->max = MR_CLI_SPEC_DEFAULT_MAX; return 0; }
    if (!strcmp(opt, "--spec-mtp")) { o->mtp = 1; if (!o->max) o->max = MR_CLI_SPEC_DEFAULT_MAX; return 0; }
    if (!strcmp(opt, "--spec-ngram")) {
        if (mr_cli_int(opt, v, 1, 64, &o->ngram)) return -1;
    } else if (!strcmp(opt, "-md") || !strcmp(opt, "--model-draft")) {
        o->draft_path = v;
    } else {
        return mr_cli_int(opt, v, 0, 64, &o->max);
    }
    if (!o->max) o->max = MR_CLI_SPEC_DEFAULT_MAX;
    return 0;
}

int mr_cli_spec_setup(mr_cli_spec *o, int n_threads, int n_ctx, mr_gen_params *gp) {
    gp->spec_max = o->max;
    gp->spec_ngram = o->ngram;
    gp->mtp = o->mtp;
    if (!o->max || !o->draft_path) return 0;
    mr_model_params dp;
    mr_model_params_default(&dp);
    mr_cli_env_apply(&dp);
    dp.n_threads = n_threads;
    dp.mtp = 1; /* a DeepSeek-V4 MTP sidecar loads as its block (other models and DSpark drafters ignore it) */
    o->draft_model = mr_model_load(o->draft_path, &dp);
    if (!o->draft_model) { fprintf(stderr, "error: draft model: %s\n", mr_last_error()); return -1; }
    o->draft = mr_session_new(o->draft_model, n_ctx);
    if (!o->draft) { fprintf(stderr, "error: draft model: %s\n", mr_last_error()); return -1; }
    gp->draft = o->draft;
    return 0;
}

static const char *spec_kind(const mr_cli_spec *o) {
    if (o->draft_model && !mr_model_n_layer(o->draft_model)) {
        const char *a = mr_model_meta_str(o->draft_model, "general.architecture");
        return a && !strcmp(a, "dflash") ? "DSpark" : "MTP";
    }
    return o->mtp ? "MTP" : o->draft_path ? "draft-model" : "n-gram";
}

void mr_cli_spec_report(const mr_cli_spec *o, const mr_gen *g, FILE *out) {
    if (!o->max) return;
    if (!mr_gen_spec_active(g)) {
        fprintf(out, "speculative: off (this model's state cannot be cut back after a rejected draft)\n");
        return;
    }
    mr_gen_stats gs;
    mr_gen_get_stats(g, &gs);
    fprintf(out, "speculative: %s drafts of up to %d, %d verification steps, %d drafted, %d accepted (%.1f%%), %.2f tokens per step\n",
            spec_kind(o), o->max, gs.n_spec_steps, gs.n_drafted, gs.n_draft_accepted,
            gs.n_drafted ? 100.0 * gs.n_draft_accepted / gs.n_drafted : 0.0,
            gs.n_spec_steps ? (double)(gs.n_spec_steps + gs.n_draft_accepted) / gs.n_spec_steps : 0.0);
}

void mr_cli_spec_free(mr_cli_spec *o) {
    mr_session_free(o->draft);
    mr_model_free(o->draft_model);
    o->draft = NULL;
    o->draft_model = NULL;
}
