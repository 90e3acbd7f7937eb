/* moerun plan -m MODEL.gguf [--ram SIZE] [-t N]: what the model needs, what this machine measures, and
 * the decode / prefill speed to expect resident and paged (src/eval/plan.c has the arithmetic). */
#include "cli.h"
#include "moerun_tools.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    const char *model, *ram, *arena;
    int threads, n_ctx;
    float seconds;
} plan_opts;

#define PLAN_OPTS(o) \
    {.names = "-m, --model", .arg = "FILE", .help = "GGUF model file, or the first shard of a split one (required)", \
     .kind = MR_OPT_STR, .dst = &(o)->model}, \
    {.names = "--ram", .arg = "SIZE", .help = "RAM the model may use (default: this machine's MemAvailable,\n" \
     "or the memory cgroup's room when smaller)", .kind = MR_OPT_STR, .dst = &(o)->ram}, \
    {.names = "--arena", .arg = "SIZE", .help = "predict for an expert arena of this size instead of the one\n" \
     "the automatic RAM budget would choose", .kind = MR_OPT_STR, .dst = &(o)->arena}, \
    {.names = "-t, --threads", .arg = "N", .help = "threads to measure and predict with (default 0 = as run does)", \
     .kind = MR_OPT_INT, .dst = &(o)->threads, .lo = 0, .hi = MR_CLI_MAX_THREADS}, \
    {.names = "-c, --ctx-size", .arg = "N", .help = "context length the KV cache is sized for (default 4096)", \
     .kind = MR_OPT_INT, .dst = &(o)->n_ctx, .lo = 0, .hi = 0x7fffffff}, \
    {.names = "--seconds", .arg = "S", .help = "time spent measuring DRAM, CPU and disk (default 3)", \
     .kind = MR_OPT_FLOAT, .dst = &(o)->seconds, .lo = 0.3, .hi = 600}

static void usage(FILE *f) {
    plan_opts o;
    const mr_opt opts[] = {PLAN_OPTS(&o)};
    fprintf(f, "usage: moerun plan -m MODEL.gguf [--ram SIZE] [--arena SIZE] [-t N]\n\n"
               "Reads the model's metadata (every shard), measures this machine for a few seconds (DRAM read\n"
               "bandwidth, the CPU on one matrix of each weight type, O_DIRECT reads of the model's own\n"
               "file as the pager does them) and prints dense and routed bytes, the bytes a token reads, the\n"
               "expert arena the automatic RAM budget would choose, the hit rate to expect there (uniform routing,\n"
               "and a trained MoE's real routing as the skewed bound), predicted decode and prefill tokens\n"
               "per second resident and paged with the bottleneck (DRAM, CPU or disk), and a command line.\n"
               "Predictions are a roofline model (docs/GUIDE.md): check them with `moerun bench`.\n");
    mr_cli_print_opts(f, opts, MR_NOPTS(opts));
}

static void gib(char *buf, size_t n, double bytes) {
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024 && u < 4) { bytes /= 1024; u++; }
    snprintf(buf, n, u ? "%.2f %s" : "%.0f %s", bytes, unit[u]);
}

static void print_model(const char *path, const mr_plan_model *pm) {
    char a[32], b[32], c[32], d[32], e[32];
    gib(a, sizeof a, (double)pm->file_bytes);
    gib(b, sizeof b, (double)pm->dense_bytes);
    gib(c, sizeof c, (double)pm->routed_bytes);
    printf("model: %s (%s, %d layers", path, pm->arch, pm->n_layer);
    if (pm->n_expert) printf(", %d MoE layers of %d experts, top-%d", pm->n_moe_layer, pm->n_expert, pm->n_expert_used);
    printf(")\n  weights %s: dense %s, routed experts %s", a, b, c);
    if (pm->slot_bytes) {
        gib(d, sizeof d, (double)pm->slot_bytes);
        printf(" (one expert %s, %s)", d, pm->expert_type_name);
    }
    gib(d, sizeof d, pm->dense_per_token);
    gib(e, sizeof e, pm->routed_per_token);
    printf("\n  per token: reads %s dense + %s routed, %.2f G multiply-adds\n", d, e, pm->active_params / 1e9);
}

static int cmd_plan(int argc, char **argv) {
    plan_opts o = {.seconds = 3, .n_ctx = 4096};
    const mr_opt opts[] = {PLAN_OPTS(&o)};
    int np = 0;
    int pr = mr_cli_parse("plan", opts, MR_NOPTS(opts), usage, argc, argv, NULL, 0, &np);
    if (pr) return pr > 0 ? 0 : 1;
    if (!o.model) { usage(stderr); fprintf(stderr, "error: no model given (-m FILE)\n"); return 1; }
    uint64_t ram = 0, arena = 0;
    if (o.ram && (mr_size_parse(o.ram, &ram) || !ram)) { fprintf(stderr, "error: bad --ram '%s'\n", o.ram); return 1; }
    mr_plan_model pm;
    mr_plan_machine mc;
    if (mr_plan_read(o.model, &pm)) { fprintf(stderr, "error: %s\n", mr_last_error()); return 1; }
    print_model(o.model, &pm);
    if (o.arena) {
        if (mr_size_parse(o.arena, &arena) || !arena) { fprintf(stderr, "error: bad --arena '%s'\n", o.arena); return 1; }
    } else if (pm.routed_bytes && mr_ram_budget_auto(o.model, ram, o.n_ctx, &arena)) {
        fprintf(stderr, "error: %s\n", mr_last_error());
        return 1;
    }
    fprintf(stderr, "plan: measuring this machine for %.1f s...\n", o.seconds);
    if (mr_plan_measure(o.model, &pm, o.threads, o.seconds, &mc)) { fprintf(stderr, "error: %s\n", mr_last_error()); return 1; }
    printf("machine: %d cores, %d threads; DRAM read %.1f GB/s; CPU on the model's rows: %.1f GB/s (1 column, "
           "streamed from DRAM), %.0f GFLOP/s (a 512-token batch: 64 columns, %d per expert); disk ", mc.cores,
           mc.threads, mc.dram_gbs, mc.cpu_gemv_gbs, mc.cpu_gemm_gflops, mc.exp_cols);
    if (mc.disk_gbs > 0) printf("%.2f GB/s (O_DIRECT 1 MiB random reads, 8 threads)\n", mc.disk_gbs);
    else printf("not measured (%s)\n", mc.disk_note);
    mr_plan_result r;
    mr_plan_predict(&pm, &mc, arena, &r);
    char a[32], b[32];
    if (!pm.routed_bytes) printf("dense model: nothing to page\n");
    else if (!arena) printf("arena: every expert fits in RAM (--ram-budget auto pages nothing)\n");
    else {
        gib(a, sizeof a, (double)arena);
        printf("arena: %s (%s), %.1f%% of the experts; hit rate to expect: %.1f%% (uniform routing) .. %.1f%% "
               "(skewed: a trained MoE's routing)\n", a, o.arena ? "--arena" : "--ram-budget auto", 100 * r.cache_frac,
               100 * r.hit_uniform, 100 * r.hit_skewed);
    }
    gib(b, sizeof b, (double)pm.file_bytes);
    printf("predicted tok/s        decode                 prefill (512-token batches)\n");
    printf("  resident (%s)  %8.2f  (%s-bound)     %8.1f  (CPU-bound)\n", b, r.decode_res, r.decode_res_bound, r.prefill_res);
    if (arena && pm.routed_bytes && mc.disk_gbs > 0)
        printf("  paged                %6.2f .. %.2f  (%s-bound)  %8.1f  (%s-bound)\n", r.decode_paged_uniform,
               r.decode_paged_skewed, r.decode_paged_bound, r.prefill_paged, r.prefill_bound);
    printf("run: moerun run -m %s -t %d", o.model, mc.threads);
    if (arena) printf(" --ram-budget %s", o.arena ? o.arena : "auto");
    printf(" -p \"...\"\n");
    return fflush(stdout) ? 1 : 0;
}

MR_COMMAND(plan, "what a model needs and how fast it should run on this machine", cmd_plan)
