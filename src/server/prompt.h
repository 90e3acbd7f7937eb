/* Prompts: a request's prompt as tokens (the rendered conversation, the forced start of a tool call,
 * or the completion prompt) and the prompt cache of a slot (the longest prefix it already holds). */
#ifndef MR_SERVER_PROMPT_H
#define MR_SERVER_PROMPT_H
#include "server/conf.h"
#include "server/request.h"
#include "server/sched.h"

/* Tokenize text (parse_special on); -1 and mr_last_error() on failure. *out is malloc'd. */
int srv_tokenize(const srv_conf *cf, const char *text, int add_special, int32_t **out);
/* The request's thinking as the template's options (*o); 1 and *t when its reply may hold reasoning
 * (mr_chat_thinking). A reply constrained from its first byte (a forced call, a JSON response format)
 * holds none: a template that would think is rendered in its non-thinking mode. */
int srv_chat_opts(const srv_conf *cf, const srv_req *q, mr_chat_opts *o, mr_chat_think *t);
/* The chat prompt of q (tools included) as text; NULL with mr_last_error() on failure. */
char *srv_render_chat(const srv_conf *cf, const srv_req *q, int add_assistant);
/* The prompt tokens of q (*toks malloc'd); *forced gets the text a tool_choice makes the reply start
 * with (malloc'd; part of the prompt), else stays NULL. Token count, or -1 with mr_last_error(). */
int srv_prompt_build(const srv_conf *cf, const srv_req *q, char **forced, int32_t **toks);

/* The chat template's message boundaries in the prompt toks[0..n) of q, for the prompt cache's
 * snapshots: after message k (1..n_msgs) where the rendering of messages [0, k) (tools included, no
 * assistant start) is a prefix of the prompt's text and ends where a token ends. Up to max token
 * counts, ascending, into marks; returns how many (0 for completions or a tokenizer whose pieces do
 * not spell the text back). */
int srv_prompt_marks(const srv_conf *cf, const srv_req *q, const int32_t *toks, int n, int *marks, int max);

/* How much of the slot's cache the prompt re-uses (its session cut back to that, or reset): the
 * longest common prefix, the last prompt token excluded (evaluated again for its logits); 0 when the
 * session cannot be cut there (deepseek4 unless the prompt extends the whole cached sequence). */
int srv_cache_reuse(srv_slot *sl, const int32_t *prompt, int n_prompt);
/* The session holds prompt[0..n_past) now (reuse..: evaluated by this request). */
void srv_cache_prompt(srv_slot *sl, const int32_t *prompt, int reuse, int n_past);
/* After a reply: the generated tokens the session evaluated (ids[0..ng), after n_prompt tokens) join
 * the cache. */
void srv_cache_reply(srv_slot *sl, int n_prompt, const int32_t *ids, int ng);
/* After a failure: the session and its cache start over. */
void srv_cache_forget(srv_slot *sl);
#endif
