/* moerun public API: the engine (models, sessions, tokenizer, sampling, generation, MoE approximations,
 * the expert pager's settings and counters, the server). The tools' own library functions (quant
 * checks, logits files, cache simulation, synthetic models, profiler, perplexity, pager reports) are in
 * moerun_tools.h. The CLI, the server and embedding programs use only these two headers.
 * Conventions: functions return 0 / a pointer on success and -1 / NULL on failure, after which
 * mr_last_error() returns a message. The library never exits the process, except through the
 * opt-in handler of mr_file_guard_install (a model file that shrank under a mapping). */
#ifndef MOERUN_H
#define MOERUN_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

const char *mr_version(void);
const char *mr_last_error(void);
void mr_set_log_level(int level); /* 0 errors, 1 info (default), 2 debug */

/* ---- kernels ---- */
/* Kernel instruction sets: 0 scalar, 1 avx2, 2 avx512 (x86-64), 3 neon, 4 dotprod (AArch64); names as
 * MOERUN_ISA (the CLI) and mr_model_params.isa take them. A build and CPU can run scalar and its own
 * family's ones only. The process's ISA is the best one unless mr_kernel_isa_set chose another; a
 * model can have its own (mr_model_params.isa). Thread-safe. */
#define MR_KERNEL_ISA_COUNT 5
const char *mr_kernel_isa_name(int isa);          /* NULL if out of range */
int mr_kernel_isa_from_name(const char *name);    /* -1 if unknown */
int mr_kernel_isa_available(int isa);             /* 1 if this build and CPU can run it */
int mr_kernel_isa_current(void);                  /* the process's (models loaded later default to it) */
int mr_kernel_isa_set(int isa);                   /* the process's from now on; -1 (error set) if unavailable */

/* ---- models, sessions, tokenizer, sampling ---- */
typedef struct mr_model mr_model;         /* a loaded GGUF model (weights mmapped), shareable by sessions */
typedef struct mr_session mr_session;     /* one sequence: KV cache / arch state + position */
typedef struct mr_tokenizer mr_tokenizer; /* defined by the tokenizer module */

/* Expert pager settings (docs/PAGING.md), part of mr_model_params; used by mr_model_load only (the
 * strings are not kept). All zero = the defaults. The CLI fills them from MOERUN_PAGER_* (moerun --help). */
typedef struct {
    const char *policy;     /* replacement policy: lru, lfu, lrfu, lru2, arc, guard, lru-layer, hazard,
                               hot (NULL or "": hot, the default); an unknown name fails the load */
    int io_threads;         /* reads in flight, 1..64 (0: 8) */
    int64_t chunk;          /* bytes per read job, rounded up to 4 KiB, at most 1 TiB (0: 1 MiB;
                               < 0: one job per expert slice) */
    int no_direct;          /* 1: buffered reads even where the file system allows O_DIRECT */
    int no_guess;           /* 1: no read-ahead of the next layer's guessed experts */
    int no_huge;            /* 1: the arena in 4 KiB pages faulted in as first used (default: its own
                               mapping in 4 KiB pages, faulted in at load) */
    int huge;               /* 1: the arena's mapping on transparent huge pages where available, faulted
                               in at load (where the kernel compacts memory for them on fault, this
                               costs several times the system time of 4 KiB pages: docs/PAGING.md) */
    const char *fault;      /* tests: "eio:N" or "short:N" (the N-th read, 1-based, fails with EIO or
                               comes back short) or "slow:MS" (every read first waits MS <= 10000
                               milliseconds); NULL or "": none. A malformed spec fails the load. */
} mr_pager_params;

/* deepseek4 graphs: the official DeepSeek V4 one (FP8 KV rows, indexer Hadamard + FP4, shared-expert
 * clamp), mainline llama.cpp's (no FP8 KV simulation, indexer Hadamard without FP4), the llama.cpp
 * fork's that made ../shared/golden (FP8, no indexer QAT, no shared-expert clamp) */
enum { MR_GRAPH_OFFICIAL = 0, MR_GRAPH_MAINLINE = 1, MR_GRAPH_FORK = 2 };

typedef struct {
    int n_threads;          /* worker threads; 0 = physical cores, at most the cgroup CPU quota and affinity */
    int n_ctx;              /* default session context; 0 = min(training context, 4096) */
    uint64_t ram_budget;    /* bytes of RAM for routed experts; 0 = no paging (experts read from the mmap) */
    int graph;              /* deepseek4, where implementations differ (docs/DEEPSEEK4.md):
                               MR_GRAPH_OFFICIAL (0, default), MR_GRAPH_MAINLINE, MR_GRAPH_FORK */
    int kv_f32;             /* 1 = keep the KV cache in F32 (default 0: F16 like the reference) */
    const char *dump;       /* debug: "all" or comma-separated intermediate names (e.g. "attn_norm,ffn_out")
                               printed to stderr with stats per layer; NULL = off */
    int dump_n;             /* values printed per dumped tensor (default 8) */
    /* load progress (may be NULL; used during mr_model_load only): called per weight matrix while
       repacking (stage "repack", done of at most total); a nonzero return stops the load
       (mr_model_load fails: "loading interrupted") */
    int (*progress)(void *user, const char *stage, int done, int total);
    void *progress_user;
    mr_pager_params pager;  /* used when ram_budget > 0 */
    const char *isa;        /* kernels of this model: a name of mr_kernel_isa_name ("scalar", "avx2", ...)
                               that mr_kernel_isa_available; NULL or "": the process's (mr_kernel_isa_current
                               at load). Every eval of the model uses it, whatever other models use. */
    int no_repack;          /* 1: no repacked (row-interleaved) weight copies; the same logits, the
                               kernels on the file's layout (docs/PERFORMANCE.md) */
    int ds4_prefill_f32;    /* deepseek4: 1 = the reference's asymmetric precision (a prefill's compressed
                               layers attend over F32 keys, a decode's over F16-rounded ones); default 0:
                               both read F16-rounded keys and agree (docs/DEEPSEEK4.md) */
    int mtp;                /* deepseek4: 1 = load the file's MTP (next-token prediction) block and keep
                               each session's last hidden states, for mr_session_mtp_draft; default 0:
                               the block is recognised and not loaded (logits are the same either way) */
} mr_model_params;

void mr_model_params_default(mr_model_params *p);
mr_model *mr_model_load(const char *path, const mr_model_params *p); /* p may be NULL (defaults) */
void mr_model_free(mr_model *m);
const char *mr_model_arch(const mr_model *m);         /* general.architecture, e.g. "qwen3moe" */
int mr_model_n_vocab(const mr_model *m);
int mr_model_n_embd(const mr_model *m);
int mr_model_n_layer(const mr_model *m);
int mr_model_n_ctx_train(const mr_model *m);
int mr_model_n_ctx(const mr_model *m);    /* default session context (params.n_ctx as resolved) */
int mr_model_n_threads(const mr_model *m);
/* The model's tokenizer (owned by the model), or NULL if the GGUF has none usable. */
mr_tokenizer *mr_model_tokenizer(const mr_model *m);
/* A string metadata value (e.g. "tokenizer.chat_template", "general.name"), NULL if absent. */
const char *mr_model_meta_str(const mr_model *m, const char *key);

/* The model file changing under the process (docs/RELIABILITY.md). mr_model_check_files: -1 (error
 * set, naming the file and its sizes) if a file of m is now smaller than when it was mapped (truncated
 * or rewritten in place; its weights are gone). mr_session_eval and mr_sessions_eval call it first, so
 * evaluations after such a change fail with that message; one fstat per file. A file replaced by
 * rename (a new inode) does not affect a loaded model. An in-place rewrite that keeps the size is
 * not detected. */
int mr_model_check_files(const mr_model *m);
/* Opt-in, for programs (the CLI installs it for every command): a SIGBUS handler for the window the
 * check cannot close (a file truncated during an eval or a load). A bus error inside a mapped model
 * file writes "moerun: fatal: bus error reading PATH at offset N: the file shrank while mapped (...)"
 * to stderr and ends the process with _exit(MR_EXIT_FILE_SHRANK); any other bus error goes to the
 * handler installed before. The only place where the library ends the process. 0, or -1 (error set). */
#define MR_EXIT_FILE_SHRANK 74 /* EX_IOERR of sysexits.h */
int mr_file_guard_install(void);

/* n_ctx 0 = the model's default (params.n_ctx). */
mr_session *mr_session_new(mr_model *m, int n_ctx);
void mr_session_free(mr_session *s);
void mr_session_reset(mr_session *s);                 /* back to position 0 */
/* Keep only the first n evaluated tokens (n <= n_past), e.g. to re-use a shared prompt prefix.
 * -1 if the architecture's state cannot be cut (then reset instead). */
int mr_session_truncate(mr_session *s, int n);
int mr_session_n_past(const mr_session *s);           /* tokens evaluated so far */
int mr_session_can_truncate(const mr_session *s);      /* 1 if mr_session_truncate can cut the state back */
int mr_session_n_ctx(const mr_session *s);
mr_model *mr_session_model(const mr_session *s);
/* Drafts from an MTP block (deepseek4 with nextn_predict_layers, loaded with mr_model_params.mtp = 1;
 * mainline llama.cpp's DECODER_MTP graph, docs/SPECULATIVE.md "MTP drafts"): the model's own (mtp NULL)
 * or an MTP sidecar's (mtp: a session of the sidecar, a file with the block and no trunk; s's model
 * loaded with mtp = 1 too, so that its sessions keep the hidden states the block reads):
 * kmax greedy tokens to follow `last`, the token after the session's evaluated ones (not yet
 * evaluated). The block first catches up on the positions evaluated since its last call (each pairs
 * the token with the trunk's hidden state of the position before), then step i runs it on draft token
 * i-1 (step 0: last) at position n_past + i with the previous step's output state. logits (may be
 * NULL): [kmax][n_vocab], the block's logits of each step. The session itself is unchanged. Returns
 * the number of drafts (kmax cut to the context), -1 with an error (no MTP block, ...). */
int mr_session_mtp_draft(mr_session *s, mr_session *mtp, int32_t last, int kmax, int32_t *out, float *logits);
/* The same for any drafter of the hook, with conf (may be NULL): [kmax] a DSpark drafter's confidence in
 * each draft (its conf_proj head; -1 where the drafter has none, as an MTP block). A DSpark drafter
 * (general.architecture dflash, docs/DEEPSEEK4.md "DSpark drafters") drafts min(kmax, block_size) tokens
 * in one block after injecting the taps of the positions evaluated since its last call. */
int mr_session_draft_conf(mr_session *s, mr_session *mtp, int32_t last, int kmax, int32_t *out, float *logits,
                          float *conf);
/* Prepare m for drafter d (an MTP sidecar: nothing to do; a DSpark drafter: m's sessions record the
 * mean of the hyper-connection streams at d's target layers from their next evaluation on, so call it
 * before the prompt is evaluated). -1 if d cannot draft for m. */
int mr_model_draft_attach(mr_model *m, const mr_model *d);
int mr_model_n_mtp(const mr_model *m); /* MTP blocks loaded (0: none or not asked for); a sidecar has
                                          mr_model_n_layer 0 */
/* Evaluate n tokens after the ones already in the session (n > 1: one batch; n == 1: decode step).
 * logits (may be NULL): all_logits ? [n][n_vocab] : [n_vocab] of the last token. Fails (-1) if a
 * token id is out of range or n_past + n > n_ctx. */
int mr_session_eval(mr_session *s, const int32_t *tokens, int n, float *logits, int all_logits);
/* Several sequences in one pass (continuous batching): tokens[t] is evaluated in session s[t] after
 * what it holds (a session's tokens in order); every session advances by its count. One forward pass
 * reads each weight (each routed expert) once for all of them; a sequence's logits are the same as
 * when it is evaluated alone. logits: [n][n_vocab]. -1 if the architecture has no multi-sequence
 * evaluation (deepseek4) or a session's context is full. */
int mr_sessions_eval(mr_session *const *s, const int32_t *tokens, int n, float *logits);
/* The same pass with logits only for the tokens with want[t] != 0 (want NULL: all): logits
 * [number wanted][n_vocab] in token order, e.g. a prompt chunk evaluated beside other sequences'
 * decode tokens wants at most the row of its last token. The rows equal mr_sessions_eval's. */
int mr_sessions_eval_rows(mr_session *const *s, const int32_t *tokens, int n, const uint8_t *want, float *logits);
int mr_model_can_batch(const mr_model *m);   /* 1 if mr_sessions_eval works for this architecture */

/* ---- snapshots: a session's whole evaluation state, saved and restored (docs/SNAPSHOTS.md) ----
 * A snapshot holds what the next evaluation reads: the KV rows of the positions evaluated, and
 * deepseek4's window ring, compressor states and indexer rows, qwen35moe's recurrent states; optionally
 * the n_past token ids; behind a header with the format version, the model's identity, sizes and
 * checksums. Restored into a session of the same model (loaded with the same kv_f32, graph and
 * ds4_prefill_f32; resident or paged, any threads), evaluation continues with the same logits, bit for
 * bit, as without the interruption. A corrupted, truncated, foreign-model or other-version snapshot
 * is refused with a message. */
#define MR_SNAPSHOT_VERSION 1
typedef struct {
    int version, n_past, has_tokens;
    uint64_t model_id;      /* mr_model_identity of the model it was taken from */
    uint64_t bytes;         /* the whole snapshot */
} mr_snapshot_info;
/* 64-bit identity of the model file and the settings that change the state (metadata, tensor table,
 * file sizes, the first bytes of the non-expert tensors, kv_f32/graph/ds4_prefill_f32); computed
 * once. The prompt cache names its files by it. */
uint64_t mr_model_identity(const mr_model *m);
/* Bytes mr_session_save needs at the session's current position (with or without the token ids);
 * 0 (error set) if the architecture cannot be saved. */
size_t mr_session_save_size(mr_session *s, int with_tokens);
/* Write the snapshot into buf[0..size) (size >= mr_session_save_size). tokens: the n_past token ids
 * to keep with it, or NULL. 0, or -1 with the error set. */
int mr_session_save(mr_session *s, const int32_t *tokens, void *buf, size_t size);
/* The same into a file: written under a temporary name in the same directory, synced, then renamed
 * to path (a crash or a full disk never leaves a partial file under path; the temporary is removed). */
int mr_session_save_file(mr_session *s, const int32_t *tokens, const char *path);
/* Replace the session's state with the snapshot's. tokens (may be NULL): receives the n_past token ids
 * (max_tokens >= n_past, and the snapshot must hold them). Returns n_past, or -1 with the error set;
 * the session is then empty (position 0), whatever it held before. Every field, size and checksum is
 * checked; a file's body checksum as it is read. */
int mr_session_restore(mr_session *s, const void *buf, size_t size, int32_t *tokens, int max_tokens);
int mr_session_restore_file(mr_session *s, const char *path, int32_t *tokens, int max_tokens);
/* The header of a snapshot in memory (its checksum, magic, version): 0 and *info, or -1. */
int mr_snapshot_peek(const void *buf, size_t size, mr_snapshot_info *info);
/* The same of a file, which must also have the size its header says; *tokens: its token ids (malloc'd,
 * NULL if it holds none), not yet checked against the body checksum (a restore does that). */
int mr_snapshot_peek_file(const char *path, mr_snapshot_info *info, int32_t **tokens);

/* ---- prompt cache: snapshots shared by every session of a model (docs/SNAPSHOTS.md) ----
 * Entries are token prefixes with the snapshot of a session that evaluated exactly them, kept in RAM
 * (least recently used dropped beyond ram_bytes) and, with a directory, in files that survive a
 * restart (beyond disk_bytes the least recently used file is removed). Thread-safe. */
typedef struct mr_pcache mr_pcache;
typedef struct {
    uint64_t ram_bytes;     /* RAM for snapshots; 0: none kept in RAM */
    const char *dir;        /* directory of snapshot files (created if missing; copied); NULL: none */
    uint64_t disk_bytes;    /* bound of the files in dir; 0: unbounded */
} mr_pcache_params;
typedef struct {
    uint64_t ram_bytes, disk_bytes;       /* held now */
    int n_entries, n_ram, n_disk;
    uint64_t hits, misses, tokens_restored, stores, disk_writes, disk_reads, evictions;
    uint64_t bad_files;                   /* refused (checksum, size, header, ids) and removed */
} mr_pcache_stats;
/* With p->dir, the directory's files of this model are found again (a file with a bad header or
 * size is removed; other models' files are left alone). NULL (error set) if dir cannot be made. */
mr_pcache *mr_pcache_new(mr_model *m, const mr_pcache_params *p);
void mr_pcache_free(mr_pcache *c);
/* Snapshot s, which holds tokens[0..n_past): 0 (also when it is already cached, or nowhere to keep
 * it; a failed file write is logged and only costs the file), -1 with the error set. */
int mr_pcache_store(mr_pcache *c, mr_session *s, const int32_t *tokens);
/* Restore into s the longest cached prefix of prompt whose length is in (min_len, max_len]:
 * its length; 0 if there is none (s untouched); -1 if it was refused (s is then empty; the snapshot
 * is removed from RAM and disk). */
int mr_pcache_restore(mr_pcache *c, mr_session *s, const int32_t *prompt, int max_len, int min_len);
void mr_pcache_stats_get(mr_pcache *c, mr_pcache_stats *st);

/* Chat templates. Known names: chatml, llama2, llama3, phi3, gemma, deepseek3, deepseek4, chatglm4,
 * gpt-oss (harmony), kimi-k2. mr_chat_template_detect: the family of the model's embedded
 * tokenizer.chat_template, else a built-in per architecture (deepseek4, gpt-oss, and chatglm4 for
 * glm4moe; chatml otherwise). mr_chat_render writes the conversation
 * (roles "system", "user", "assistant", and "tool" for a tool's result), plus the assistant prefix if
 * add_assistant, as text to be tokenized with parse_special = 1. tmpl NULL = detected. Returns the
 * length (like snprintf: may exceed size, then the text is truncated), -1 on an unknown template or
 * role, or tools / tool calls in a template without them. */
typedef struct { const char *id, *name, *arguments; } mr_chat_tool_call; /* arguments: a JSON object's text */
typedef struct {
    const char *role, *content;              /* content may be NULL (an assistant turn that only calls tools) */
    const mr_chat_tool_call *tool_calls;     /* assistant: the calls it made */
    int n_tool_calls;
    const char *tool_call_id;                /* tool: the call this result answers */
    const char *reasoning;                   /* assistant: its reasoning (reasoning_content; NULL: none) */
} mr_chat_msg;
const char *mr_chat_template_detect(const mr_model *m);
int mr_chat_template_known(const char *name);
int mr_chat_render(const mr_model *m, const char *tmpl, const mr_chat_msg *msgs, int n, int add_assistant,
                   char *out, int size);
/* With tools: tools[i] is one function's definition as compact JSON ({"name":..,"description":..,
 * "parameters":{JSON schema}}), rendered where the template's format puts them (templates with tool
 * calls: chatml (Qwen/Hermes <tool_call>), llama3, deepseek3, deepseek4 (DSML)). Earlier calls of
 * assistant turns are rendered in the same bytes the model writes them, so a re-sent history matches
 * the prompt cache. */
int mr_chat_render_tools(const mr_model *m, const char *tmpl, const mr_chat_msg *msgs, int n, const char *const *tools,
                         int n_tools, int add_assistant, char *out, int size);
/* Thinking (reasoning), as the request asks for it: thinking -1 the template's default (deepseek4:
 * off; Qwen3.5 (qwen35moe): on; other templates: the model decides), 0 off, 1 on; effort the
 * request's reasoning_effort (deepseek4 "max": its maximum-effort preamble; NULL: none);
 * keep_reasoning 1: earlier assistant turns' reasoning is rendered where the template can keep it
 * (deepseek4's drop_thinking false); otherwise each template keeps what its reference does
 * (deepseek4: the turns after the last user turn, or all when tools are given or the conversation
 * has tool results). gpt-oss is rendered as its harmony reference template (system message with the
 * date and "Reasoning: EFFORT", default medium) when thinking or an effort is given or the model's
 * template is that one, else as llama.cpp's built-in gpt-oss format. opts NULL: all defaults (the same
 * as mr_chat_render_tools). */
typedef struct {
    int thinking;
    const char *effort;
    int keep_reasoning;
    const char *date;      /* gpt-oss: the "Current date" of its system message (YYYY-MM-DD; NULL: today, UTC) */
} mr_chat_opts;
int mr_chat_render_opts(const mr_model *m, const char *tmpl, const mr_chat_msg *msgs, int n, const char *const *tools,
                        int n_tools, const mr_chat_opts *opts, int add_assistant, char *out, int size);
/* Where a reply's reasoning is: between open and close (deepseek4, deepseek3, chatml (Qwen), chatglm4,
 * kimi-k2: "<think>" and "</think>"; gpt-oss: the analysis channel, "<|channel|>analysis<|message|>"
 * to "<|end|><|start|>assistant"); in_prompt 1 when the generation prompt already ends with open (the
 * reply starts inside the reasoning); answer_prefix, text after close that is not the answer (gpt-oss:
 * the final channel's header; NULL: none). Returns 1 and fills *t when a reply rendered with opts may
 * hold reasoning, 0 when it cannot (thinking off, a template without thinking). */
typedef struct {
    const char *open, *close;
    int in_prompt;
    const char *answer_prefix;
} mr_chat_think;
int mr_chat_thinking(const mr_model *m, const char *tmpl, const mr_chat_opts *opts, mr_chat_think *t);
/* A reply text[0..len) split: the reasoning is text[r_off, r_off + r_len), the answer text[c_off,
 * len) (whitespace and answer_prefix after close skipped); done 1 once the reasoning has ended (or
 * the reply has none). While the reply goes on (final 0) only what is sure is counted: a tail that
 * may still become close (or open, or answer_prefix) is in neither, and c_off is len until the answer
 * has begun. A reply that does not start with open (after whitespace), when in_prompt is 0, has no
 * reasoning: all of it is the answer. A reply cut inside its reasoning (final, done 0) is reasoning
 * only. */
typedef struct {
    size_t r_off, r_len, c_off;
    int done;
} mr_chat_split;
void mr_chat_split_reasoning(const mr_chat_think *t, const char *text, size_t len, int final, mr_chat_split *s);
/* 1 when template tmpl's reply markers (tool calls, channels) are control tokens in its models'
 * vocabularies, so a reply's text must show them (mr_gen_params.special_text): kimi-k2, gpt-oss. */
int mr_chat_special_markers(const char *tmpl);
/* The text that opens tool calls in a reply of template tmpl (NULL if it has none): text from it on
 * is held back while streaming. */
const char *mr_chat_tool_marker(const mr_model *m, const char *tmpl);
/* How template tmpl writes one tool call, for constrained calls (mr_gen_calls): forced, the text the
 * prompt ends with so that the reply is a call, then prefix NAME middle ARGUMENTS suffix (dsml: the
 * arguments as DSML parameters). chatml: "<tool_call>\n" + {"name": "NAME", "arguments": {...}};
 * deepseek4: the DSML block of one invoke. -1 (message) if the template has no tool calls. */
typedef struct { const char *forced, *prefix, *middle, *suffix; int dsml; } mr_chat_call_format;
int mr_chat_tool_call_format(const mr_model *m, const char *tmpl, mr_chat_call_format *f);
/* Tool calls at the end of a reply: *content_len = bytes of text before them; calls[0..max) get
 * malloc'd name and arguments (JSON object text; free with mr_chat_tool_calls_free) and id NULL.
 * Returns the number of calls (0: no marker: all text), -1 when the marker is there but the calls are
 * malformed (the caller then returns all of it as text). */
int mr_chat_parse_tool_calls(const mr_model *m, const char *tmpl, const char *text, size_t len, size_t *content_len,
                             mr_chat_tool_call *calls, int max);
void mr_chat_tool_calls_free(mr_chat_tool_call *calls, int n);

/* ---- MoE approximations (docs/APPROX.md) ----
 * Optional, off by default (then results are exact). Set on a loaded model at any time; they take
 * effect at the next eval (mr_session_eval) of any of its sessions.
 * Top-k tail pruning: per token, of the top-k routed experts sorted by weight w, keep the smallest
 * prefix whose weights add up to >= prune_p of their sum, only experts with w >= prune_tau * w_max and
 * w >= prune_min_w, and at most prune_k of them (at least prune_min, at least 1); the kept weights are
 * rescaled (prune_rescale) so the L2 norm (or the sum, or the rho mix of both) of all k weights is
 * preserved. Dropped experts are not read (pager) nor computed. Pruning applies to the layers
 * [layer_first, layer_last] only, and never to hash-routed layers (deepseek4's layers routed by token
 * id) unless prune_hash is set.
 * Gate-first SwiGLU row skipping: per token and expert, g = W_gate x first; rows with
 * |silu(g_i)| < max(skip_rel * max_i |silu(g_i)|, skip_abs) skip up_i = W_up[i] x (h_i = 0), and the
 * down projection skips the weight blocks whose h-values are all skipped.
 * Row skipping as a fixed budget (rows_routed / rows_shared / rows_dense = m, 1..128): in every block
 * of 128 consecutive rows keep the m with the largest |silu(g_i)| (equal values: lower row first; a
 * shorter last block of L rows keeps ceil(m L / 128)), skip the others as above, and scale the kept
 * h_i by sqrt(sum_block silu(g)^2 / sum_kept silu^2) of their block. rows_routed applies to the
 * routed experts (instead of skip_rel / skip_abs: one rule at a time), rows_shared to the shared
 * expert (deepseek4, qwen35moe, deepseek2), rows_dense to dense FFN layers; 128 keeps every row (the
 * exact values through the skipping path), 0 is off. */
/* RHO: alpha = sqrt(((1-rho) sum_all w^2 + rho (sum_all w)^2) / ((1-rho) sum_kept w^2 + rho (sum_kept w)^2)),
 * L2 at rho = 0, L1 at rho = 1 (rho: how correlated the experts' outputs are assumed to be) */
enum { MR_APPROX_RESCALE_L2 = 0, MR_APPROX_RESCALE_L1 = 1, MR_APPROX_RESCALE_NONE = 2, MR_APPROX_RESCALE_RHO = 3 };
typedef struct {
    float prune_p;       /* cumulative-weight threshold in (0, 1); 0 or >= 1: off */
    float prune_tau;     /* relative weight threshold in (0, 1]; 0: off */
    int prune_min;       /* keep at least this many experts (values < 1 mean 1) */
    int prune_rescale;   /* MR_APPROX_RESCALE_* (default L2) */
    int prune_k;         /* keep at most this many experts (a fixed top-k); 0: off */
    float prune_min_w;   /* drop experts whose weight (as the router outputs it) is below this; 0: off */
    float prune_rho;     /* MR_APPROX_RESCALE_RHO's rho in [0, 1] */
    int layer_first, layer_last; /* pruning only in these layers (layer_last < 0: to the last one) */
    int prune_hash;      /* also prune hash-routed layers */
    float skip_rel;      /* row skipping relative to the largest |silu(g_i)| of the row; 0: off */
    float skip_abs;      /* row skipping below this absolute |silu(g_i)|; 0: off */
    int rows_routed;     /* routed experts: keep this many rows of every 128 (0: off) */
    int rows_shared;     /* the same for shared experts */
    int rows_dense;      /* the same for dense FFN layers */
    /* Cache-aware expert selection (paging only; docs/APPROX.md): a routed expert that is not in the
     * pager's arena (a miss) is replaced by the best-scoring cached expert of the layer not already
     * chosen when that one's selection score s_c >= s_miss - sub_margin * |s_miss| and the miss's
     * weight is at most sub_w (0: any weight); then, with sub_budget, at most sub_miss misses stay
     * per token and layer (the lowest-scoring others take the next best cached experts). The weights
     * are the router's for the new set. Not in hash-routed layers unless sub_hash. */
    float sub_margin;    /* relative score margin, 0: no margin rule */
    float sub_w;         /* the margin rule only for misses with weight <= sub_w; 0: any weight */
    int sub_budget;      /* 1: the budget sub_miss applies (spec: sub_miss=B; sub_miss=-1 clears it) */
    int sub_miss;        /* misses kept per token and layer (with sub_budget) */
    int sub_hash;        /* also in hash-routed layers */
} mr_approx_params;
void mr_approx_params_default(mr_approx_params *p);      /* everything off: exact */
int mr_approx_params_enabled(const mr_approx_params *p); /* 1 if the setting changes anything */
/* Update p from a spec like "prune=0.9 tau=0.1 min=1 rescale=l2|l1|none|rho skip=0.05 skip_abs=0.01",
 * also k=5 (fixed top-k), min_w=0.11, rho=0.3 (implies rescale=rho), layers=3-42 (or 3-: to the end),
 * prune_hash=0|1, rows=96 (routed experts), rows_shared=96, rows_dense=96, sub_margin=0.2, sub_w=0.1,
 * sub_miss=2, sub_hash=0|1 (cache-aware selection; sub_miss=-1: no budget) (keys separated by spaces
 * or commas; "off" resets everything; "exact" is the same).
 * Only the keys given change. -1 (error set, p unchanged) on an unknown key or a value out of range. */
int mr_approx_parse(const char *spec, mr_approx_params *p);
/* "prune=0.9 tau=0 min=1 rescale=l2 skip=0.05 skip_abs=0" or "off"; returns snprintf's length. */
int mr_approx_format(const mr_approx_params *p, char *buf, size_t len);
/* p NULL = off. Returns -1 on invalid parameters (nothing changes). Thread-safe: may be called while
 * another thread evaluates m; an eval uses the setting requested before it started, throughout. */
int mr_model_set_approx(mr_model *m, const mr_approx_params *p);
void mr_model_get_approx(const mr_model *m, mr_approx_params *p);  /* the setting last requested */
/* Control file (docs/APPROX.md "Switching while running"): a text file with one spec, e.g.
 * "k=5 layers=3-" ('#' starts a comment; empty or "off" = exact). It holds the whole setting: keys
 * not given are off (the spec is parsed from mr_approx_params_default). Poll it between evals:
 * one stat() per call; the file is read (at most MR_APPROX_FILE_MAX bytes, a regular file) when it
 * changed. A missing file changes nothing (it may be written later; removing it keeps the setting).
 * mr_approx_file_poll: 1 the file changed and its setting was applied to m (from the next eval),
 * 0 nothing new, -1 the file is bad (mr_last_error says why; the previous setting stays) -- returned
 * once per version of the file, so a caller reports each problem once. Thread-safe (several
 * threads may poll one file), also while another thread evaluates m. Write the file
 * atomically (a temporary file renamed over it): a poll may otherwise read it half written. */
#define MR_APPROX_FILE_MAX 4096
typedef struct mr_approx_file mr_approx_file;
mr_approx_file *mr_approx_file_open(const char *path); /* NULL (error set) only when out of memory */
int mr_approx_file_poll(mr_approx_file *f, mr_model *m);
const char *mr_approx_file_path(const mr_approx_file *f);
void mr_approx_file_free(mr_approx_file *f);
/* The file's text as a whole setting (comments removed, parsed from the defaults): 0, or -1 (error set). */
int mr_approx_file_parse(const char *text, mr_approx_params *p);
/* Counters of the evals run with approximations on (cumulative until reset). */
typedef struct {
    uint64_t token_layers;              /* (token, MoE layer) pairs */
    uint64_t experts_routed;            /* top-k selections (token_layers * k) */
    uint64_t experts_kept;              /* of those, computed after pruning */
    uint64_t rows_total, rows_skipped;  /* SwiGLU rows of the computed (token, expert) pairs; skipped */
    uint64_t blocks_total, blocks_skipped; /* down-projection weight blocks per (token, expert) column; skipped */
    uint64_t ffn_rows_total, ffn_rows_skipped; /* SwiGLU rows of shared experts and dense FFNs (rows_shared, rows_dense) */
    uint64_t sub_token_layers;          /* cache-aware selection: (token, MoE layer) pairs it looked at */
    uint64_t sub_misses;                /* routed experts of those that were misses (before substitution) */
    uint64_t sub_substituted;           /* of those, replaced by a cached expert */
} mr_approx_stats;
void mr_model_approx_stats(const mr_model *m, mr_approx_stats *s);
void mr_model_approx_stats_reset(mr_model *m);

/* Tokenizer: SPM ("llama") and byte-level BPE ("gpt2", with the pre-tokenizer named by
 * tokenizer.ggml.pre), loaded from any GGUF that has tokenizer.ggml.* metadata. Ids match the
 * reference llama.cpp. A tokenizer is immutable after loading and may be shared between threads. */
mr_tokenizer *mr_tokenizer_load(const char *gguf_path);
void mr_tokenizer_free(mr_tokenizer *t);
int32_t mr_tokenizer_n_vocab(const mr_tokenizer *t);
int32_t mr_tokenizer_bos(const mr_tokenizer *t);          /* -1 if none */
int32_t mr_tokenizer_eos(const mr_tokenizer *t);          /* -1 if none */
int32_t mr_tokenizer_eot(const mr_tokenizer *t);          /* end of turn, -1 if none */
int mr_tokenizer_adds_bos(const mr_tokenizer *t);         /* model asks for BOS (add_bos_token) */
int mr_tokenizer_is_eog(const mr_tokenizer *t, int32_t id); /* ends generation (eos, eot, <|im_end|>...) */
int mr_tokenizer_is_control(const mr_tokenizer *t, int32_t id);
const char *mr_tokenizer_model(const mr_tokenizer *t);    /* "llama" or "gpt2" */
const char *mr_tokenizer_pre(const mr_tokenizer *t);      /* tokenizer.ggml.pre ("" if absent) */
const char *mr_token_text(const mr_tokenizer *t, int32_t id); /* raw vocabulary string, NULL if bad id */
int32_t mr_token_lookup(const mr_tokenizer *t, const char *text, size_t len); /* exact vocab string -> id or -1 */
/* Tokenize len bytes of text. add_special: add the model's BOS (and EOS) as its metadata asks
 * (like llama.cpp's add_special). parse_special: text like "<|im_start|>" becomes that control
 * token (user-defined tokens are always matched). Returns the number of ids written, -needed if
 * max is too small (nothing written), INT_MIN on error (mr_last_error()). */
int mr_tokenize(const mr_tokenizer *t, const char *text, size_t len, int add_special, int parse_special,
                int32_t *out, int max);
/* The bytes of one token (SPM U+2581 -> space, <0xNN> -> byte, byte-level BPE code points -> bytes).
 * special = 0 renders control/unknown tokens as "". Returns the length (not NUL-terminated),
 * -needed if size is too small, INT_MIN for a bad id. */
int mr_token_to_piece(const mr_tokenizer *t, int32_t id, char *buf, int size, int special);
/* Text of a token sequence as llama.cpp's detokenize (leading-space removal for SPM, BPE
 * clean-up of " ," etc.). Returns the length, -needed if size is too small, INT_MIN on error. */
int mr_detokenize(const mr_tokenizer *t, const int32_t *ids, int n, char *text, int size, int remove_special,
                  int unparse_special);

/* Sampling. A sampler owns its RNG and the recent-token history used by the repetition penalty.
 * Order of the steps (as llama.cpp's default chain): logit biases, penalties (repetition, then
 * presence and frequency), top-k, top-p, min-p, temperature, then a draw from the softmax.
 * temperature <= 0 is greedy (argmax after biases and penalties; ties: lowest id).
 * Presence and frequency penalties follow OpenAI: the logit of a token generated c > 0 times in this
 * reply (tokens accepted since mr_sampler_begin_reply; prompt tokens do not count) drops by
 * presence + c * frequency. */
typedef struct {
    float temperature;    /* default 0.8; <= 0: greedy */
    int32_t top_k;        /* default 40; <= 0: off */
    float top_p;          /* default 0.95; >= 1: off */
    float min_p;          /* default 0.05; <= 0: off */
    float repeat_penalty; /* default 1.0 (off); logits of recent tokens: > 0 divided, < 0 multiplied */
    int32_t repeat_last_n;/* default 64: how many recent tokens the penalty looks at (<= MR_SAMPLER_MAX_LAST_N) */
    uint64_t seed;        /* default 0x5eed */
    float presence_penalty;  /* default 0 (off) */
    float frequency_penalty; /* default 0 (off) */
    /* logit biases (OpenAI logit_bias): bias_vals[i] added to the logit of bias_ids[i]; copied by
     * mr_sampler_new, which fails on an id outside the vocabulary, an id given twice, or a NaN;
     * values are clamped to [-100, 100] and -100 bans the token (its logit becomes -inf) */
    const int32_t *bias_ids;
    const float *bias_vals;
    int32_t n_bias;
} mr_sampler_params;
#define MR_SAMPLER_MAX_LAST_N (1 << 20)
#define MR_SAMPLER_BIAS_MAX 100.0f
typedef struct mr_sampler mr_sampler;
void mr_sampler_default_params(mr_sampler_params *p);
mr_sampler *mr_sampler_new(const mr_sampler_params *p, int32_t n_vocab);
void mr_sampler_free(mr_sampler *s);
void mr_sampler_reset(mr_sampler *s);                    /* forget history, reseed */
void mr_sampler_accept(mr_sampler *s, int32_t id);       /* record a token (prompt or generated) */
/* The tokens accepted from now on are the reply's (presence / frequency penalties count them);
 * mr_gen_prefill calls it after the prompt. */
void mr_sampler_begin_reply(mr_sampler *s);
int32_t mr_sampler_sample(mr_sampler *s, const float *logits); /* logits[n_vocab] (not modified); -1 on error */
/* Verify a drafted token (speculative decoding): returns the token to emit and sets *accepted to 1
 * when it is the draft. The emitted token has exactly mr_sampler_sample's distribution (accept with
 * probability p(draft), else draw from p without the draft); greedy: the argmax. */
int32_t mr_sampler_verify(mr_sampler *s, const float *logits, int32_t draft, int *accepted);
/* Deterministic RNG (xoshiro256**, seeded with splitmix64): same seed, same sequence everywhere. */
typedef struct { uint64_t s[4]; } mr_rng;
void mr_rng_seed(mr_rng *r, uint64_t seed);
uint64_t mr_rng_next(mr_rng *r);
double mr_rng_uniform(mr_rng *r);                        /* [0, 1), 53 random bits */

/* ---- expert parallelism (several processes or hosts over MPI; `make MPI=1`) ----
 * mr_ep_start removes "--ep" from argv; with it, it joins the MPI job and returns this process's
 * rank (without it: 0, nothing started; in a build without MPI, --ep is an error: -1). Rank 0 runs
 * the command and mr_ep_attach's its model: routed experts owned by other ranks are computed there
 * (byte-identical results). Ranks > 0 load the same model (their own pager and --ram-budget) and
 * mr_ep_serve it until rank 0 calls mr_ep_stop (which every rank calls at exit). */
int mr_ep_start(int *argc, char ***argv);
int mr_ep_active(void);
int mr_ep_rank(void);
int mr_ep_size(void);
int mr_ep_attach(mr_model *m);
int mr_ep_serve(mr_model *m);
void mr_ep_stop(void);

/* ---- generation: the loop of run, chat and the server ----
 * A generator samples from a session: mr_gen_prefill evaluates prompt tokens (in chunks of n_batch,
 * calling progress between chunks: a nonzero return aborts), then each mr_gen_next samples one token
 * and returns the text that is safe to show: whole UTF-8 characters only, never a suffix that could
 * still grow into a stop string; at the end of the reply the rest is flushed. A stop string ends the
 * reply and is cut from the text (with whatever followed it in the same token). Accepted tokens are
 * evaluated lazily, at the start of the next step or the next prefill (a chat's next turn), so the
 * last token of a reply costs no eval. mr_gen_accept takes tokens decided elsewhere (e.g. a draft
 * verified by speculative decoding): they go through the same text / stop / limit checks and are
 * evaluated as one batch by the next step. Greedy (temperature 0) output is the argmax chain. */
typedef struct mr_gen mr_gen;
enum { MR_GEN_RUNNING = 0, MR_GEN_EOG, MR_GEN_STOP, MR_GEN_LENGTH, MR_GEN_CONTEXT, MR_GEN_ABORTED };
/* progress(user, done, total) during prefill: before the first chunk (done 0) and after each. */
typedef int (*mr_gen_progress_fn)(void *user, int done, int total);
/* A tool call to constrain a reply to: prefix NAME middle ARGUMENTS suffix, NAME one of names[],
 * ARGUMENTS valid against that function's JSON Schema (the json_schema subset; NULL: any object),
 * written as JSON, or with dsml as DeepSeek-V4 DSML parameters (<｜DSML｜parameter name="K"
 * string="true">text</｜DSML｜parameter> for string properties, string="false" and JSON for the
 * rest, a newline between them, then "\n</｜DSML｜invoke>"). Compiled by mr_gen_new (the strings need
 * not outlive it). */
typedef struct mr_gen_calls {
    int n;
    const char *const *names;
    const char *const *schemas;
    const char *prefix, *middle, *suffix;
    int dsml;
} mr_gen_calls;
typedef struct {
    mr_sampler_params sampler;
    int max_tokens;              /* tokens per reply; < 0 (default): until the context is full */
    const char *const *stop;     /* stop strings (copied by mr_gen_new; empty ones ignored) */
    int n_stop;                  /* at most 16, each at most 256 bytes */
    int ignore_eos;              /* 1: end-of-generation tokens are never sampled (llama.cpp --ignore-eos) */
    int n_batch;                 /* prefill chunk in tokens (default 512); results do not depend on it */
    mr_gen_progress_fn progress; /* may be NULL */
    void *user;
    /* Speculative decoding (off when spec_max is 0): each step drafts up to spec_max tokens and
     * verifies them with the pending token in one batch; output is exactly that of plain decoding
     * (greedy: token for token; sampled: the same distribution). Drafts come from draft (a session
     * of a smaller model with the same vocabulary, owned by the caller, used only by this
     * generator) or, when draft is NULL, from the longest earlier match of the last spec_ngram..1
     * tokens of the context (prompt lookup). Needs a session that can be cut back
     * (mr_session_can_truncate); otherwise it stays off (mr_gen_spec_active). */
    int spec_max;                /* draft tokens per step, 0..64 */
    int spec_ngram;              /* n-gram size for prompt lookup (default 3) */
    int spec_ngram_min;          /* shortest n-gram that may propose a draft (default 1) */
    int spec_min;                /* drafts shorter than this are not verified (a plain step instead; 0..spec_max) */
    /* Constrained sampling (response_format json_object): every token whose text would make the reply
     * not a prefix of a JSON object is masked before sampling (end-of-generation tokens too, until the
     * object is whole); the reply ends (MR_GEN_EOG) at the token that completes the object. A reply
     * cut by max_tokens, the context or a stop string may be incomplete; MR_GEN_LENGTH also when no
     * token of the vocabulary could continue it. Nesting is bounded (32 containers). */
    int json_object;
    /* Constrained sampling (response_format json_schema): the reply is a JSON value valid against
     * this JSON Schema (text; copied by mr_gen_new, which fails naming the keyword when the schema
     * is outside the subset of docs/SERVER.md "JSON schemas"); otherwise as json_object, which it
     * replaces. End-of-generation tokens are allowed where the value is whole but could go on (a
     * number). NULL: none. */
    const char *json_schema;
    /* Constrained tool call (tool_choice required / named): the reply is one call of one of the
     * functions, in the chat template's format (mr_chat_tool_call_format), with arguments valid
     * against that function's schema; replaces json_schema and json_object. NULL: none. */
    const struct mr_gen_calls *calls;
    /* With calls: lazy (tool_choice auto): the reply is free until its text contains this (the
     * template's tool-call marker, mr_chat_tool_marker); the text after it must continue the call
     * (calls' prefix starts right after the marker), and the reply ends when the call is complete.
     * Until then nothing is masked: a reply without the marker is the unconstrained one. Text after
     * the marker that no call can start with leaves the reply free. NULL: calls from the first byte. */
    const char *calls_after;
    /* Thinking (think NULL: none): the reply's reasoning as mr_chat_thinking describes it; once
     * think_budget tokens of reasoning were generated without its close marker, the marker's
     * tokens are put in (the reply goes on with the answer); think_budget < 0: no limit. Lazy calls
     * (calls_after) start only after the reasoning. The strings are copied by mr_gen_new. */
    const mr_chat_think *think;
    int think_budget;
    /* 1: control tokens other than end-of-generation ones are written into the reply's text (their
     * text, as mr_token_to_piece with special 1); for templates whose markers are such tokens
     * (mr_chat_special_markers). 0: they add no text. */
    int special_text;
    mr_session *draft;           /* (a session of an MTP sidecar: drafts from its block, mr_session_mtp_draft) */
    int mtp;                     /* 1: drafts from the model's own MTP block (mr_session_mtp_draft) */
    /* or drafts from the caller (takes precedence): write up to kmax tokens that follow
     * hist[0..n_hist) (the context: prompts and accepted tokens) to out, return how many (0: none) */
    int (*draft_fn)(void *user, const int32_t *hist, int n_hist, int kmax, int32_t *out);
    void *draft_user;
} mr_gen_params;
typedef struct {
    const char *text;            /* text to show now (not NUL-terminated; valid until the next call) */
    size_t len;
    int n_accepted;              /* tokens accepted by this step (0 when it ended the reply on an EOG) */
    int finish;                  /* MR_GEN_RUNNING: call again; otherwise why the reply ended */
} mr_gen_step;
typedef struct {
    int n_prompt, n_gen, n_decode;   /* prompt tokens prefilled, tokens accepted, decode evals run */
    double prefill_s, decode_s;      /* time in mr_gen_prefill; in mr_gen_next (evals + sampling) */
    int n_spec_steps;                /* verification evals (speculative decoding) */
    int n_drafted, n_draft_accepted; /* draft tokens proposed / accepted by verification */
    int n_mask;                      /* json_object / json_schema: token masks computed */
    double mask_s;                   /* time in them (part of decode_s) */
} mr_gen_stats;                      /* cumulative over the generator's replies */
void mr_gen_params_default(mr_gen_params *p);
/* 0 if the JSON Schema text is in the subset mr_gen_params.json_schema takes; -1 and a message naming
 * the keyword or the limit if not. */
int mr_json_schema_check(const char *schema, size_t len);
/* 0 if mr_gen_new can constrain a reply to these calls (every function's schema in the subset, DSML
 * arguments an object); -1 and a message naming the function and the keyword if not. */
int mr_gen_calls_check(const struct mr_gen_calls *calls);
mr_gen *mr_gen_new(mr_session *s, const mr_gen_params *p);   /* p NULL = defaults */
void mr_gen_free(mr_gen *g);
/* Evaluate n prompt tokens after what the session holds (pending tokens of the last reply first)
 * and start a new reply. 0 done, 1 aborted by progress (the chunks evaluated so far stay in the
 * session: see mr_session_n_past), -1 error (the session must be reset). The prompt must leave room
 * for at least one generated token. */
int mr_gen_prefill(mr_gen *g, const int32_t *tokens, int n);
int mr_gen_next(mr_gen *g, mr_gen_step *out);                            /* 0 or -1 (error set) */
int mr_gen_accept(mr_gen *g, const int32_t *ids, int n, mr_gen_step *out); /* 0 or -1 */
/* End the reply now (e.g. Ctrl-C, a closed connection): finish MR_GEN_ABORTED, the held text flushed. */
void mr_gen_stop(mr_gen *g, mr_gen_step *out);
/* After mr_session_reset / mr_session_truncate by the caller: forget pending tokens and logits. */
void mr_gen_reset(mr_gen *g);
const char *mr_gen_text(const mr_gen *g, size_t *len);      /* the reply so far (after a stop cut) */
int mr_gen_tokens(const mr_gen *g, const int32_t **ids);     /* tokens accepted in this reply */
int mr_gen_n_pending(const mr_gen *g);                       /* accepted tokens not yet evaluated */
/* Evaluation done elsewhere (continuous batching: mr_sessions_eval over several generators'
 * sessions): mr_gen_pending gives the tokens to evaluate in the generator's session; after the caller
 * evaluated them, mr_gen_set_evaluated passes the logits of the last one ([n_vocab]) and the next
 * mr_gen_next only samples. */
int mr_gen_pending(const mr_gen *g, const int32_t **ids);
int mr_gen_set_evaluated(mr_gen *g, const float *logits);
/* The same for a prompt: tokens[0..n) were evaluated in the session by the caller (no tokens may be
 * pending), logits ([n_vocab]) are the last one's; starts a new reply as mr_gen_prefill does (the
 * caller times it: mr_gen_stats.prefill_s does not grow). */
int mr_gen_prefill_evaluated(mr_gen *g, const int32_t *tokens, int n, const float *logits);
/* The same with speculative decoding: mr_gen_batch returns how many tokens (*ids) to evaluate in the
 * generator's session for the next step -- the pending ones and, when speculative decoding is on and
 * found a draft, the draft (0: nothing to evaluate) -- and where the logits of the last *n_rows of
 * them go (*rows, [n_rows][n_vocab], owned by the generator). After the caller evaluated them (e.g.
 * with other sessions' tokens in one mr_sessions_eval), mr_gen_batch_done verifies the draft and
 * samples: the step mr_gen_next would take, with the same tokens (greedy) or distribution. */
int mr_gen_batch(mr_gen *g, const int32_t **ids, float **rows, int *n_rows);
int mr_gen_batch_done(mr_gen *g, mr_gen_step *out);
const float *mr_gen_logits(const mr_gen *g);                 /* [n_vocab] of the last evaluated token */
mr_sampler *mr_gen_sampler(mr_gen *g);  /* e.g. mr_sampler_accept of a prompt prefix reused from a cache */
void mr_gen_get_stats(const mr_gen *g, mr_gen_stats *out);
int mr_gen_spec_active(const mr_gen *g);   /* 1 if speculative decoding is on for this generator */
const char *mr_gen_finish_name(int finish);  /* "eog", "stop", "length", "context", "aborted" */

/* ---- expert pager ---- */
/* The pager of a loaded model (mr_model_params.ram_budget > 0 pages routed experts through a slot
 * arena; see docs/PAGING.md). Counters are cumulative since the model was loaded. */
typedef struct {
    int paging;                          /* 0: no budget, experts served from the mmap */
    int n_slots, direct_io;              /* expert slots; 1 if reads use O_DIRECT */
    int huge_pages;                      /* 1 if the arena is on transparent huge pages (madvise) */
    int repacked_mats, expert_mats;      /* routed-expert matrices (layers x gate/up/down) repacked in
                                            their slots as read (the resident kernels' layout); all */
    uint64_t slot_bytes, arena_bytes;    /* one slot (an expert's gate+up+down), all slots */
    uint64_t expert_bytes, min_budget;   /* routed-expert bytes in the file; smallest legal budget */
    uint64_t hits, misses;               /* expert uses served resident / read from disk */
    uint64_t reads, bytes_read, rounds;  /* pread calls, bytes, forward passes */
    double stall_s;                      /* time compute waited for reads */
    double io_busy_s;                    /* time at least one read was in flight */
    uint64_t hint_reads, hint_used;      /* experts read ahead on a guess of the next layer; of them used */
    uint64_t hint_cancelled, hint_wasted;/* unused: reads cancelled before starting; read for nothing */
    uint64_t miss_bytes;                 /* bytes read for the misses (used guesses included, unused not) */
    uint64_t decode_evals;               /* evaluations of one token per sequence, and of them: */
    uint64_t decode_miss_bytes, decode_bytes_read; /* bytes of their misses; all bytes read during them */
    double decode_s, decode_io_busy_s;   /* their wall time; I/O busy time during them */
    double layer_hit_min, layer_hit_max; /* hit rate of the worst / best MoE layer (-1: no uses yet) */
    int layer_min, layer_max;
} mr_pager_stats;
int mr_model_pager_stats(const mr_model *m, mr_pager_stats *out); /* -1 if the model has no routed experts */
/* I/O efficiency of decode (the decode_* counters, now - prev; prev NULL: since the start): the time its
 * miss bytes need at the device's rate measured in the run (bytes read / I/O busy time, the higher of
 * the whole run's and this decode's) over its wall time. ~1: decode is bound by the disk; near 0: by
 * compute. Returns -1 when nothing was decoded or read; *need_s and *rate (bytes/s) may be NULL. */
double mr_pager_io_efficiency(const mr_pager_stats *now, const mr_pager_stats *prev, double *need_s, double *rate);
/* Sizes of a model file as the pager sees it (without loading the model). */
typedef struct {
    uint64_t total_bytes, expert_bytes;  /* all tensor bytes; routed-expert tensor bytes */
    uint64_t slot_bytes, min_budget;     /* 0 for a dense model */
    uint64_t kv_bytes_per_token;         /* F16 K+V estimate from the attention metadata */
} mr_pager_model_info;
int mr_pager_model_sizes(const char *model_path, mr_pager_model_info *info);
/* --ram-budget: "8G", "512M", "1.5GiB", "0"/"off" (no paging) or "auto" (MemAvailable, or the memory cgroup's
 * room when smaller, minus dense
 * weights, KV cache for n_ctx, scratch and a 10% margin; 0 = no paging when all experts fit). */
int mr_ram_budget_parse(const char *arg, const char *model_path, int n_ctx, uint64_t *out);
/* The arena "auto" chooses when `avail` bytes of RAM are free (0: this machine's MemAvailable, or the
 * memory cgroup's room when smaller): 0 when every expert fits (no paging); -1 if below the minimum. */
int mr_ram_budget_auto(const char *model_path, uint64_t avail, int n_ctx, uint64_t *out);
/* Bytes of RAM this process may still use: MemAvailable, or the memory cgroup's room when smaller
 * (0 if /proc/meminfo cannot be read). */
uint64_t mr_mem_available(void);
/* A size: a number with an optional K/M/G/T (binary multiples; "KiB", "MB" spell the same), e.g.
 * "512M", "1.5G", "0": 0, or -1 if the whole string is not one. */
int mr_size_parse(const char *s, uint64_t *out);

/* ---- OpenAI-compatible server ---- */
typedef struct {
    const char *host;    /* e.g. "127.0.0.1" */
    int port;
    int n_ctx;           /* 0 = model default */
    const char *alias;   /* model id reported by /v1/models (NULL = general.name) */
    volatile int *stop;  /* serve until *stop != 0 (set from a signal handler, or from another thread with __atomic_store_n: it is read with an atomic load) */
    int listen_fd;       /* >= 0: a socket from mr_server_listen (bound before the model loads); -1: bind host:port */
    const char *api_key; /* NULL: open; else every endpoint but /health needs "Authorization: Bearer KEY" or
                            "x-api-key: KEY" */
    int n_parallel;      /* slots (sessions) served at once; their decode steps are batched (default 1) */
    const char *chat_template; /* NULL: detected */
    const char *admin_key;  /* key for POST /v1/admin/moe (NULL: api_key; neither: the endpoint answers 403) */
    const char *approx_file; /* MoE approximation control file polled before every eval (NULL: none) */
    int step_prompt;     /* prompt tokens per batched step beside the decode tokens (0 = MR_SERVER_STEP_PROMPT) */
    int spec_max;        /* speculative decoding with n-gram drafts (mr_gen_params.spec_max; 0: off unless a
                            request asks with "speculative.n_max") */
    int spec_ngram;      /* n-gram size of the drafts (default 3) */
    int spec_mtp;        /* drafts from the model's MTP block instead (mr_gen_params.mtp; the model loaded with
                            mr_model_params.mtp) */
    /* The prompt cache shared by all slots (mr_pcache, docs/SERVER.md "Prompt cache"): snapshots at the
     * chat template's message boundaries, every cache_every tokens of a prompt, where a prompt diverged
     * from the slot's history, at the prompt's end and after each reply. Off when cache_ram is 0 and cache_dir is NULL. */
    uint64_t cache_ram;     /* RAM for snapshots (bytes) */
    const char *cache_dir;  /* directory of snapshot files (they survive a restart); also where POST
                               /slots/N?action=save|restore keeps its files; NULL: none */
    uint64_t cache_disk;    /* bound of the files in cache_dir (0: unbounded) */
    int cache_every;        /* a snapshot every N tokens of a long prompt (0: MR_SERVER_CACHE_EVERY) */
} mr_server_params;
#define MR_SERVER_CACHE_EVERY 1024
#define MR_SERVER_STEP_PROMPT 32
void mr_server_params_default(mr_server_params *p);
/* Binds and listens: the socket, or -1 (mr_last_error) when the address is taken or invalid. */
int mr_server_listen(const char *host, int port);
int mr_server_run(mr_model *m, const mr_server_params *p);

#ifdef __cplusplus
}
#endif
#endif
