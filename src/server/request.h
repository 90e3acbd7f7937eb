/* Requests of the OpenAI (chat/completions, completions) and Anthropic (messages) APIs, checked and
 * normalised into one struct. Every field the server knows is type-checked: a wrong type or a value
 * out of range is an error naming the field (HTTP 400); a feature the server cannot honour (images,
 * a JSON schema outside the subset, ...) is refused, never ignored.
 * Pure functions over a parsed JSON tree: callable from tests and fuzzers. */
#ifndef MR_SERVER_REQUEST_H
#define MR_SERVER_REQUEST_H
#include "moerun.h"
#include "json/json.h"

#define SRV_MAX_STOP 16
#define SRV_MAX_N 16
#define SRV_MAX_TOP_LOGPROBS 20
#define SRV_MAX_MESSAGES 4096
#define SRV_MAX_TOOLS 128
#define SRV_MAX_LOGIT_BIAS 1024      /* entries of logit_bias (OpenAI allows 300) */

enum { SRV_API_COMPLETIONS, SRV_API_CHAT, SRV_API_ANTHROPIC, SRV_API_RESPONSES };
enum { SRV_TOOLS_NONE, SRV_TOOLS_AUTO, SRV_TOOLS_REQUIRED, SRV_TOOLS_NAMED };

typedef struct {
    int api;
    mr_sampler_params sp;
    int seed_given;
    int max_tokens;              /* -1: until the context is full */
    int stream, include_usage;
    const char *stop[SRV_MAX_STOP];
    int n_stop;
    int n;                       /* choices */
    int logprobs;                /* report log-probabilities of the chosen tokens */
    int top_logprobs;            /* and of this many alternatives */
    int echo;                    /* completions: the prompt is part of the text */
    int spec_max, spec_min;      /* "speculative.n_max" (-1: the server's --draft-max) / "speculative.n_min" */
    int32_t *bias_ids;           /* logit_bias (also in sp, which points here) */
    float *bias_vals;
    int n_bias;
    int json_object;             /* response_format json_object: constrained sampling */
    const char *json_schema;     /* response_format json_schema: the schema as JSON text (in the subset) */
    /* completions: a prompt as text or as token ids */
    const char *prompt;
    int32_t *prompt_ids;
    int n_prompt_ids;
    /* chat / messages: the conversation (strings owned by this struct or the JSON tree) */
    mr_chat_msg *msgs;
    int n_msgs;
    /* tools: each function's definition as compact JSON ({"name":..,"description":..,"parameters":..}) */
    char **tools;
    char **tool_names;
    char **tool_params;          /* each function's parameters schema as JSON text (NULL: none given) */
    int n_tools;
    int tool_choice;             /* SRV_TOOLS_* */
    const char *tool_choice_name;
    int parallel_calls;          /* 0: at most one call per reply (parallel_tool_calls false,
                                  * Anthropic disable_parallel_tool_use) */
    /* thinking (mr_chat_opts): -1 the template's default, 0 off, 1 on; reasoning_effort; earlier
     * reasoning kept (drop_thinking false); the budget in tokens (-1: none) */
    int thinking;
    const char *effort;
    int keep_reasoning;
    int think_budget;
    /* owned allocations */
    char **owned;
    int n_owned, cap_owned;
    mr_chat_tool_call *calls;    /* pool for the messages' tool calls */
    int n_calls;
} srv_req;

/* Parse body j of the given api into r (zeroed first). 0 ok; -1 with err[] set (message naming the
 * field; the answer is 400). The JSON tree must outlive r. Free with srv_req_free.
 * SRV_API_RESPONSES: everything but the conversation (msgs), which srv_resp_input (responses.h)
 * builds from the stored items and the request's. */
int srv_req_parse(const mr_json *j, int api, srv_req *r, char *err, size_t errlen);
void srv_req_free(srv_req *r);

/* ---- shared with the Responses API's items (responses.c) ---- */
/* err[] formatted; returns -1 */
int srv_req_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* p (malloc'd) owned by r from now on; NULL (p freed) when out of memory */
char *srv_req_own(srv_req *r, char *p);
/* content c (a string, null, or text parts) as one text (*out NULL for null); where names it in errors */
int srv_req_content(srv_req *r, const mr_json *c, const char *where, const char **out, char *err, size_t errlen);
#endif
