/* moerun tools API: library functions behind the CLI's measuring and checking commands (inspect,
 * quant-check, logits, cache-sim, synth, perplexity, --profile, the pager reports). Built on the engine
 * API of moerun.h, which it includes; an embedding program normally needs moerun.h only. Same
 * conventions: 0 / a pointer on success, -1 / NULL after which mr_last_error() says why. */
#ifndef MOERUN_TOOLS_H
#define MOERUN_TOOLS_H
#include "moerun.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- GGUF files ---- */
/* Print a GGUF model (a single file or the first shard of a split model) to `out`: header, metadata
 * (long arrays abbreviated, with their length), tensor table (name, type, dims, bytes, shard,
 * offset), totals per type, and routed-expert bytes (ffn_{gate,up,down}_exps) vs the rest.
 * -1 if the file is missing or malformed (mr_last_error() names the file and the problem). */
int mr_inspect(const char *path, FILE *out);

/* ---- quant kernels against golden files (moerun quant-check) ---- */
/* Checking one golden quant file (../shared/golden/quants/TYPE.bin): dequantization must be bit
 * for bit ggml's; y = W x (x converted to the partner type, then the ISA's vec_dot, or the scalar
 * reference where that ISA has no kernel) must be within MR_QUANT_CHECK_Y_TOL of ggml's y,
 * relative to sum_i |w_i x_i| of the row. */
#define MR_QUANT_CHECK_Y_TOL 1e-5
typedef struct {
    int type;                  /* ggml type id from the file, -1 if the header was unreadable */
    char type_name[16];
    int rows, cols, nx;
    int isa;                   /* instruction set checked */
    int isa_fallback;          /* 1: that ISA has no kernel for the type; the scalar one was used */
    long dequant_mismatches;   /* dequantized values not bit-identical to ggml's */
    double dequant_max_abs;    /* largest |ours - ggml| among them (inf for NaN) */
    double y_max_rel;          /* largest |y - y_ggml| / sum_i |w_i x_i| */
    int y_worst_row, y_worst_col;
    int pass;                  /* dequant_mismatches == 0 && y_max_rel <= MR_QUANT_CHECK_Y_TOL */
} mr_quant_check_result;
/* 0 when the file was checked (see res->pass), -1 when it is unreadable or malformed. */
int mr_quant_check_file(const char *path, int isa, mr_quant_check_result *res);

/* ---- logits files and golden comparisons (moerun logits, tests) ---- */
/* .lgts files (shared/README.md): "LGTS", version 1, n_rows, n_vocab, positions[n_rows],
 * float logits[n_rows][n_vocab]. mr_lgts_read allocates *positions and *logits (free()). */
int mr_lgts_write(const char *path, int n_rows, int n_vocab, const int32_t *positions, const float *logits);
int mr_lgts_read(const char *path, int *n_rows, int *n_vocab, int32_t **positions, float **logits);

/* Comparison of engine logits with reference logits, row by row (both [n_rows][n_vocab]):
 * KL(softmax(ref) || softmax(eng)) per row (computed in double), its max / median / 95th percentile,
 * and the fraction of rows whose argmax agrees. */
typedef struct {
    int n_rows;
    double kl_max, kl_median, kl_p95, kl_mean;
    int kl_max_row;             /* row index of the max */
    int top1_equal;             /* rows with the same argmax */
    double top1_frac;
} mr_logits_cmp;
int mr_logits_compare(const float *ref, const float *eng, int n_rows, int n_vocab, mr_logits_cmp *out);
double mr_logits_kl(const float *ref, const float *eng, int n_vocab);   /* one row */
/* All measures of one row (ref = the baseline, eng = the run compared with it; p = softmax(ref),
 * q = softmax(eng), computed in double):
 *   kl       KL(p || q) = sum_i p_i ln(p_i / q_i)  (= mr_logits_kl)
 *   cosine   sum_i p_i q_i / sqrt(sum_i p_i^2 * sum_i q_i^2)  (cosine of the probability vectors)
 *   kl_top10 KL over 11 bins: the baseline's 10 most likely tokens T (ties: lower id first), each its own
 *            bin, and one bin for all other tokens: sum_{i in T} p_i ln(p_i/q_i) + p_R ln(p_R/q_R),
 *            p_R = sum_{i not in T} p_i (likewise q_R). 0 <= kl_top10 <= kl; it ignores how q spreads
 *            the mass outside T.
 *   rank     rank of the baseline's top-1 token among eng's logits (0 = also eng's top-1; ties count the
 *            lower id first, like the argmax): same top-1 = rank 0, top-3 agreement = rank < 3 */
typedef struct {
    double kl, cosine, kl_top10;
    int rank;
} mr_logits_row_cmp;
#define MR_LOGITS_TOPN 10
void mr_logits_compare_row(const float *ref, const float *eng, int n_vocab, mr_logits_row_cmp *out);
/* Tolerance classes of shared/README.md: "strict", "quant", "chaotic" (and the prefill half of
 * "indexer"). Returns 1 if the comparison passes, 0 if not (why[] gets the reason), -1 for an unknown class. */
int mr_logits_check_class(const char *cls, const mr_logits_cmp *c, char *why, size_t why_len);

/* ---- expert-cache simulation (moerun cache-sim) ---- */
/* Routing traces (shared/README.md format "KJVR") and the expert-cache simulator behind
 * `moerun cache-sim`: accesses replayed token -> layer -> rank through one global cache of
 * (layer, expert) pairs. Policy names: mr_cache_sim_policy(0 .. mr_cache_sim_n_policies()-1), which
 * include "belady" (offline optimum), "static" (the best fixed set) and "oracle1" (a look-ahead bound, not a usable policy). */
typedef struct mr_routing_trace mr_routing_trace;
mr_routing_trace *mr_routing_trace_load(const char *path);
/* A synthesized trace: each token routes each layer to top_k distinct experts drawn independently with
 * popularity (rank + 1)^-zipf over a random ranking per layer (zipf 0 = uniform); seed fixes it. */
mr_routing_trace *mr_routing_trace_synth(int n_tokens, int n_layer, int top_k, int n_expert, double zipf,
                                         uint64_t seed);
void mr_routing_trace_free(mr_routing_trace *t);
void mr_routing_trace_shape(const mr_routing_trace *t, int *n_tokens, int *n_layer, int *top_k, int *n_expert);
typedef struct { uint64_t accesses, hits; } mr_cache_sim_result;
int mr_cache_sim(const mr_routing_trace *t, const char *policy, int n_slots, mr_cache_sim_result *out);
int mr_cache_sim_n_policies(void);
const char *mr_cache_sim_policy(int i, const char **desc); /* NULL if out of range */
const char *mr_cache_default_policy(void);

/* ---- pager reports (--stats-file, summaries, bounds) ---- */
/* Belady-optimal hit rate for the recorded expert-use trace and the same slot count (computed on
 * call, O(n log n)); -1 when not paging. *truncated = 1 if only a prefix was recorded. */
double mr_model_pager_belady(const mr_model *m, int *truncated);
/* Static-optimum hit rate (the slot count's most used experts, loaded beforehand) over the expert uses
 * from number `from` on (hits + misses of an earlier mr_pager_stats: e.g. decode only); -1 if none. */
double mr_model_pager_static(const mr_model *m, uint64_t from, int *truncated);
/* --stats-file: one JSON line per token with the increments since *prev (NULL: since the start):
 * {"token":N,"hits":..,"misses":..,"reads":..,"bytes_read":..,"stall_ms":..,"total_hits":..,...} */
int mr_pager_stats_json(FILE *f, long token, const mr_pager_stats *now, const mr_pager_stats *prev);
/* Summary at exit: tok/s, hot/cold %, bytes read per token, stall, per-layer hit range, Belady, peak RSS. */
void mr_pager_print_summary(FILE *f, const mr_model *m, long n_prefill, double prefill_s, long n_decode,
                            double decode_s);
/* One line for a stretch of evaluation (now - prev): hit rate and the static optimum of its uses (m may
 * be NULL: -1), bytes read, read stall, I/O busy time and read GB/s while busy, tok/s of n_tokens in
 * seconds; then its decode I/O efficiency line (mr_pager_print_io_efficiency) if it decoded. */
void mr_pager_print_delta(FILE *f, const mr_model *m, const char *label, const mr_pager_stats *now, const mr_pager_stats *prev,
                          long n_tokens, double seconds);
/* One line with mr_pager_io_efficiency (moerun.h; nothing when it is -1): "pager: decode I/O efficiency 88% (LABEL): ..." */
void mr_pager_print_io_efficiency(FILE *f, const char *label, const mr_pager_stats *now, const mr_pager_stats *prev);
uint64_t mr_peak_rss_bytes(void);

/* ---- synthetic models (moerun synth) ---- */
/* Synthetic random-weight models of real shapes (moerun synth). */
typedef struct {
    const char *shape;   /* e.g. "qwen3-30b-a3b" (mr_synth_list prints them) */
    const char *mix;     /* quant mix, e.g. "q4_0", "q4_k_m", "iq4_xs", "iq3s-mxfp4" */
    int n_layers;        /* 0 = the shape's full depth */
    float zipf;          /* routing skew (0 = none) */
    uint64_t seed;
    const char *ratios;  /* deepseek4: per-layer compress ratios "0,0,4,128" (NULL = the shape's) */
    const char *layout;  /* deepseek4: "trunk" (NULL), "mtp" (a bundled MTP block), "mtp-only" (an MTP
                            sidecar), "dspark" (arch dflash drafter), "v41" (arch deepseek41) */
    float shexp_clamp;   /* deepseek4: > 0 writes swiglu_clamp_shexp = this per layer (0: key absent) */
} mr_synth_params;
int mr_synth(const char *path, const mr_synth_params *p);
void mr_synth_list(FILE *out);

/* ---- measurement ---- */
/* Per-operator profiler (forward passes bracket operators; see src/base/prof.h). */
void mr_profile_enable(int on);
void mr_profile_reset(void);
void mr_profile_eval_time(int phase, double sec); /* wall time of evals (phase 0 prefill, 1 decode) */
void mr_profile_report(FILE *out);                /* per phase: calls/token, ms/token, share */

/* Perplexity with llama-perplexity semantics: the tokens are cut into chunks of n_ctx; the first token
 * of each chunk is replaced by BOS (if bos >= 0); the second half of each chunk is scored (logits of
 * positions n_ctx/2 .. n_ctx-2 predict the next token). Optionally saves the scored rows' logits
 * (save_path) or compares them with a saved baseline (kl_base_path): KL mean/median/p99/max, top-1 and
 * top-3 agreement, mean probability cosine, mean top-10 KL (mr_logits_compare_row), baseline PPL.
 * Each half of a chunk is one evaluation, or pieces of n_batch tokens (n_batch > 0; 1: token by token,
 * as decoding evaluates; exact results do not depend on it). progress (may be NULL) is called after
 * each chunk. */
typedef struct {
    int n_chunks;               /* chunks scored */
    int n_scored;               /* tokens scored */
    double ppl, ppl_err;        /* perplexity and its standard error (as llama-perplexity reports) */
    double nll;                 /* mean negative log-likelihood */
    int has_kl;                 /* the fields below are set when a baseline was given */
    double kl_mean, kl_max, kl_median, kl_p99, top1_frac, base_ppl;
    double cos_mean, kl_top10_mean, top3_frac; /* mr_logits_compare_row's measures, means over the scored rows */
} mr_ppl_result;
typedef void (*mr_ppl_progress_fn)(void *user, int chunk, int n_chunks, double ppl_so_far);
int mr_perplexity(mr_model *m, const int32_t *tokens, int n_tokens, int n_ctx, int max_chunks, int n_batch, int32_t bos,
                  const char *save_path, const char *kl_base_path, mr_ppl_progress_fn progress, void *user,
                  mr_ppl_result *res);

/* ---- moerun plan (src/eval/plan.c): a model's needs and predicted speed on this machine ---- */
typedef struct {
    char arch[32];
    int n_layer, n_moe_layer, n_expert, n_expert_used;
    int expert_type;               /* ggml type of the largest routed-expert tensor */
    char expert_type_name[16];
    uint64_t file_bytes, dense_bytes, routed_bytes, slot_bytes, min_budget;
    double dense_per_token;        /* bytes of non-expert weights read per token (one embedding row) */
    double routed_per_token;       /* bytes of the top-k experts of every MoE layer */
    double active_params;          /* weights multiplied per token (prefill FLOPs = 2 x this) */
    int n_types;                   /* the weight types a token multiplies (at most 8; the rest join the last) */
    int type[8];
    double type_bytes[8], type_params[8]; /* per token, by type */
    double type_exp_params[8];     /* the routed experts' share of type_params */
} mr_plan_model;
typedef struct {
    int cores, threads;
    double dram_gbs;               /* read bandwidth over 512 MiB, `threads` threads (1e9 B/s) */
    double cpu_gemv_gbs;           /* one column through the model's matrices streamed from DRAM in the
                                      engine's layout, by the per-token bytes of each type (gemv_gbs[i]:
                                      pm->type[i]) */
    double cpu_gemm_gflops;        /* a 512-token prefill's columns: 64 for dense matrices, 512 x top-k /
                                      experts for routed ones (by the per-token weights of each type) */
    int exp_cols;                  /* the routed experts' columns in that prefill */
    double gemv_gbs[8], gemm_gflops[8], gemm_exp_gflops[8];
    double disk_gbs;               /* O_DIRECT 1 MiB random reads, 8 threads, on the model's file; 0: none */
    char disk_note[256];           /* why disk_gbs is 0 */
} mr_plan_machine;
typedef struct {
    uint64_t arena;                /* expert arena (0: every expert resident) */
    double cache_frac, hit_uniform, hit_skewed;
    double decode_res, prefill_res, decode_paged_uniform, decode_paged_skewed, prefill_paged; /* tok/s */
    const char *decode_res_bound, *decode_paged_bound, *prefill_bound; /* "DRAM", "CPU" or "disk" */
} mr_plan_result;
int mr_plan_read(const char *path, mr_plan_model *pm);
int mr_plan_measure(const char *path, const mr_plan_model *pm, int threads, double seconds, mr_plan_machine *mc);
void mr_plan_predict(const mr_plan_model *pm, const mr_plan_machine *mc, uint64_t arena, mr_plan_result *r);
double mr_plan_hit_skewed(double cache_frac); /* the default policy on kjv-moe's real routing, 0..1 */

#ifdef __cplusplus
}
#endif
#endif
