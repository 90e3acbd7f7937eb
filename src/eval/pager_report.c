/* Reports of the expert pager for the tools (moerun_tools.h): the JSON lines of --stats-file, the
 * summary printed at exit, the counters of one phase, the peak RSS. Public API only. */
#include "moerun_tools.h"
#include "base/base.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

int mr_pager_stats_json(FILE *f, long token, const mr_pager_stats *now, const mr_pager_stats *prev) {
    mr_pager_stats zero;
    if (!prev) { memset(&zero, 0, sizeof zero); prev = &zero; }
    int n = fprintf(f,
                    "{\"token\":%ld,\"hits\":%llu,\"misses\":%llu,\"reads\":%llu,\"bytes_read\":%llu,"
                    "\"stall_ms\":%.3f,\"total_hits\":%llu,\"total_misses\":%llu,\"total_bytes_read\":%llu}\n",
                    token, (unsigned long long)(now->hits - prev->hits), (unsigned long long)(now->misses - prev->misses),
                    (unsigned long long)(now->reads - prev->reads),
                    (unsigned long long)(now->bytes_read - prev->bytes_read), 1e3 * (now->stall_s - prev->stall_s),
                    (unsigned long long)now->hits, (unsigned long long)now->misses,
                    (unsigned long long)now->bytes_read);
    if (n < 0) { mr_set_error("stats file: write failed: %s", strerror(errno)); return -1; }
    return 0;
}

uint64_t mr_peak_rss_bytes(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru)) return 0;
    return (uint64_t)ru.ru_maxrss * 1024; /* Linux: KiB */
}

void mr_pager_print_io_efficiency(FILE *f, const char *label, const mr_pager_stats *now, const mr_pager_stats *prev) {
    mr_pager_stats zero;
    if (!prev) { memset(&zero, 0, sizeof zero); prev = &zero; }
    double need, rate;
    const double e = mr_pager_io_efficiency(now, prev, &need, &rate);
    if (e < 0) return;
    const uint64_t miss = now->decode_miss_bytes - prev->decode_miss_bytes, rd = now->decode_bytes_read - prev->decode_bytes_read;
    const uint64_t n = now->decode_evals - prev->decode_evals;
    /* bytes read during decode beyond its misses: guesses never used (and guesses for the next eval) */
    const double extra = rd > miss ? (double)(rd - miss) : 0;
    fprintf(f, "pager: decode I/O efficiency %.0f%% (%s, %llu evals): reading its misses (%.1f MiB per eval) at %.2f GB/s, "
               "the run's best read rate, takes %.1f ms of the %.1f ms an eval took; %.1f%% of the bytes read during "
               "decode were guesses never used: %s\n",
            100 * e, label, (unsigned long long)n, (double)miss / (double)n / 1048576.0, rate / 1e9, 1e3 * need / (double)n,
            1e3 * (now->decode_s - prev->decode_s) / (double)n, rd ? 100.0 * extra / (double)rd : 0.0,
            e >= 0.7 ? "bound by the disk" : e < 0.3 ? "bound by compute" : "disk and compute both limit it");
}

void mr_pager_print_summary(FILE *f, const mr_model *m, long n_prefill, double prefill_s, long n_decode,
                            double decode_s) {
    mr_pager_stats s;
    char a[32], b[64], c[32], d[32];
    if (n_prefill > 0 && prefill_s > 0) fprintf(f, "pager: prefill %.2f tok/s (%ld tokens)\n", n_prefill / prefill_s, n_prefill);
    if (n_decode > 0 && decode_s > 0) fprintf(f, "pager: decode %.2f tok/s (%ld tokens)\n", n_decode / decode_s, n_decode);
    mr_format_bytes(a, sizeof a, (double)mr_peak_rss_bytes());
    if (mr_model_pager_stats(m, &s) || !s.paging) {
        fprintf(f, "pager: off (experts served from the mmap), peak RSS %s\n", a);
        return;
    }
    mr_format_bytes(b, sizeof b, (double)s.arena_bytes);
    mr_format_bytes(c, sizeof c, (double)s.slot_bytes);
    mr_format_bytes(d, sizeof d, (double)s.expert_bytes);
    fprintf(f, "pager: %d slots of %s = %s for %s of experts (%s reads%s, %d of %d expert matrices repacked as read), peak RSS %s\n",
            s.n_slots, c, b, d, s.direct_io ? "O_DIRECT" : "buffered", s.huge_pages ? ", huge pages" : "", s.repacked_mats,
            s.expert_mats, a);
    uint64_t acc = s.hits + s.misses;
    long toks = n_prefill + n_decode;
    mr_format_bytes(a, sizeof a, (double)s.bytes_read);
    if (toks > 0) {
        char t[48];
        mr_format_bytes(t, sizeof t, (double)s.bytes_read / (double)toks);
        snprintf(b, sizeof b, " (%s/token)", t);
    } else b[0] = 0;
    fprintf(f, "pager: hot %.1f%% cold %.1f%% of %llu expert uses, read %s%s, read stall %.2f s, I/O busy %.2f s (%.2f GB/s)\n",
            acc ? 100.0 * (double)s.hits / (double)acc : 0, acc ? 100.0 * (double)s.misses / (double)acc : 0,
            (unsigned long long)acc, a, b, s.stall_s, s.io_busy_s,
            s.io_busy_s > 0 ? (double)s.bytes_read / s.io_busy_s / 1e9 : 0.0);
    mr_pager_print_io_efficiency(f, "whole run", &s, NULL);
    mr_approx_stats as;
    mr_model_approx_stats(m, &as);
    if (as.sub_token_layers) {
        if (toks > 0) snprintf(b, sizeof b, "%.2f substitutions per token, ", (double)as.sub_substituted / (double)toks);
        else b[0] = 0;
        fprintf(f, "pager: cache-aware selection: %s%.3f per MoE layer of a token, %.1f%% of the %.3f misses per layer "
                   "the router chose\n", b, (double)as.sub_substituted / (double)as.sub_token_layers,
                as.sub_misses ? 100.0 * (double)as.sub_substituted / (double)as.sub_misses : 0.0,
                (double)as.sub_misses / (double)as.sub_token_layers);
    }
    if (s.hint_reads)
        fprintf(f, "pager: read ahead %llu experts for the next layer's guessed batch: %llu used, %llu cancelled "
                   "before reading, %llu read for nothing\n", (unsigned long long)s.hint_reads,
                (unsigned long long)s.hint_used, (unsigned long long)s.hint_cancelled, (unsigned long long)s.hint_wasted);
    int trunc = 0;
    double bel = mr_model_pager_belady(m, &trunc);
    fprintf(f, "pager: per-layer hit rate %.1f%% (layer %d) .. %.1f%% (layer %d); Belady (same trace and slots) ",
            100 * s.layer_hit_min, s.layer_min, 100 * s.layer_hit_max, s.layer_max);
    if (bel >= 0) fprintf(f, "%.1f%%%s", 100 * bel, trunc ? " (over the first 4M uses)" : "");
    else fprintf(f, "-");
    double st = mr_model_pager_static(m, 0, &trunc);
    if (st >= 0) fprintf(f, ", static optimum %.1f%%\n", 100 * st);
    else fprintf(f, "\n");
}

void mr_pager_print_delta(FILE *f, const mr_model *m, const char *label, const mr_pager_stats *now, const mr_pager_stats *prev,
                          long n_tokens, double seconds) {
    uint64_t h = now->hits - prev->hits, mi = now->misses - prev->misses, by = now->bytes_read - prev->bytes_read;
    double st = now->stall_s - prev->stall_s, busy = now->io_busy_s - prev->io_busy_s;
    int trunc = 0;
    double so = m ? mr_model_pager_static(m, prev->hits + prev->misses, &trunc) : -1;
    fprintf(f, "pager: %s: %ld tokens in %.2f s (%.2f tok/s), hit %.1f%% of %llu uses (static optimum %.1f%%), "
               "read %.2f GiB (%.1f MiB/token), read stall %.2f s, I/O busy %.2f s (%.2f GB/s while busy)\n",
            label, n_tokens, seconds, seconds > 0 ? (double)n_tokens / seconds : 0.0,
            h + mi ? 100.0 * (double)h / (double)(h + mi) : 0.0, (unsigned long long)(h + mi),
            so >= 0 && !trunc ? 100 * so : -1.0,
            (double)by / (1024.0 * 1024 * 1024), n_tokens > 0 ? (double)by / (1024.0 * 1024) / (double)n_tokens : 0.0,
            st, busy, busy > 0 ? (double)by / busy / 1e9 : 0.0);
    mr_pager_print_io_efficiency(f, label, now, prev);
}
