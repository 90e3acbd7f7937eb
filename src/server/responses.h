/* The OpenAI Responses API (POST /v1/responses): its conversation, built from the request's input
 * items and, with previous_response_id, the items of a stored response; the fields only it has
 * (echoed in the response object); the bounded in-memory store of past responses that a follow-up
 * continues. The sampling fields, tools, tool_choice and text.format are srv_req_parse's
 * (SRV_API_RESPONSES); the reply is reply_responses.c's. */
#ifndef MR_SERVER_RESPONSES_H
#define MR_SERVER_RESPONSES_H
#include "server/request.h"

#define SRV_STORE_MAX 256                        /* responses kept; the oldest goes first */
#define SRV_STORE_MAX_BYTES ((size_t)64 << 20)   /* their items' JSON text, in all */

/* Past responses: id -> the conversation's items as JSON text (input and output items). Thread-safe. */
typedef struct srv_store srv_store;
srv_store *srv_store_new(int max_entries, size_t max_bytes);
void srv_store_free(srv_store *st);

/* One request's Responses-only part. Strings point into the body's tree or are owned here. */
typedef struct srv_resp {
    srv_store *store;
    mr_json *items;              /* the conversation's items (stored + input): q's messages point into it */
    mr_sbuf items_text;          /* the same items as JSON text, "[item,item" (no closing bracket) */
    const char *instructions, *prev_id;
    int store_it;                /* "store" (default true) */
    unsigned long long tag;      /* the store's (srv_resp_id) */
    char *tools, *tool_choice, *format, *metadata; /* echoed as given (JSON text), NULL: absent */
    /* the writer's state */
    int seq;                     /* the stream's next sequence_number */
    int n_out;                   /* output items written */
    int incomplete;              /* cut by max_output_tokens or the context */
} srv_resp;

/* Reads body j's Responses-only fields and builds q's conversation (instructions as the system
 * message, the stored items of previous_response_id, the input items). 0; -1 with err[] and *status
 * (400, 404 for a previous_response_id the store does not hold). Free rs with srv_resp_free (also
 * after a failure). */
int srv_resp_input(srv_store *st, const mr_json *j, srv_req *q, srv_resp *rs, int *status, char *err, size_t errlen);
void srv_resp_free(srv_resp *rs);
/* The id of the request's response n: "resp_N_TAG", TAG the store's, random per server start, so that
 * an id from before a restart is unknown (404) rather than another conversation. */
void srv_resp_id(const srv_resp *rs, unsigned long n, char *out, size_t size);
/* Stores response id with rs's items and the output items out[0..n) (JSON items separated by
 * commas), when the request asked to store it. */
void srv_resp_save(srv_resp *rs, const char *id, const char *out, size_t n);
#endif
