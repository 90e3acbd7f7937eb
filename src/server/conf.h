/* The server's configuration: fixed once the server listens, read by every request without a lock. */
#ifndef MR_SERVER_CONF_H
#define MR_SERVER_CONF_H
#include "moerun.h"

typedef struct {
    mr_model *m;
    const mr_tokenizer *tok;
    const char *model_name, *api_key, *admin_key, *tmpl;
    struct srv_store *store;   /* the Responses API's past responses (responses.h; locks itself) */
    int n_ctx, n_vocab, n_slots;
    int spec_max, spec_ngram;  /* speculative decoding: the server's default draft length (0: off), n-gram size */
    int spec_mtp;              /* drafts from the model's MTP block instead of n-grams */
    int cache_every;           /* prompt cache: a snapshot every N prompt tokens */
    const char *cache_dir;     /* its directory (also the slot files'), or NULL */
    double started;            /* mr_now() at start (uptime) */
    long started_wall;         /* time(NULL) at start ("created" of the model) */
} srv_conf;
#endif
