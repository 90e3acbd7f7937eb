/* moerun plan (src/eval/plan.c): the prediction arithmetic on made-up inputs with figures worked out
 * by hand, and the metadata reading on synthesized models (MoE with an MTP block, dense). */
#include "test.h"
#include "moerun_tools.h"

#include <math.h>
#include <stdlib.h>
#include <unistd.h>

static char dir[] = "/tmp/moerun-test-plan-XXXXXX";

static int near(double a, double b) { return fabs(a - b) <= 1e-9 * fabs(b) + 1e-12; }

/* 1.5 GB per token at 10 GB/s of CPU (DRAM 20): 1 / 0.15 s = 6.667 tok/s, CPU-bound; 1e9 weights per
 * token at 100 GFLOP/s: 50 tok/s prefill. 4 layers x 256 experts = 1024 pairs of 11e6 bytes. */
static void base(mr_plan_model *pm, mr_plan_machine *mc) {
    memset(pm, 0, sizeof *pm);
    memset(mc, 0, sizeof *mc);
    pm->n_moe_layer = 4, pm->n_expert = 256, pm->n_expert_used = 6, pm->slot_bytes = 11000000;
    pm->dense_per_token = 1e9, pm->routed_per_token = 5e8, pm->active_params = 1e9;
    mc->dram_gbs = 20, mc->cpu_gemv_gbs = 10, mc->cpu_gemm_gflops = 100, mc->disk_gbs = 1;
}

static void test_resident(void) {
    mr_plan_model pm;
    mr_plan_machine mc;
    mr_plan_result r;
    base(&pm, &mc);
    mr_plan_predict(&pm, &mc, 0, &r);
    CHECK(near(r.decode_res, 1 / 0.15) && !strcmp(r.decode_res_bound, "CPU"), "decode %g %s", r.decode_res, r.decode_res_bound);
    CHECK(near(r.prefill_res, 50), "prefill %g", r.prefill_res);
    CHECK(r.cache_frac == 1 && near(r.decode_paged_uniform, r.decode_res), "no arena: nothing paged");
    mc.cpu_gemv_gbs = 40; /* now DRAM is the slower: 1.5e9 / 20e9 = 0.075 s */
    mr_plan_predict(&pm, &mc, 0, &r);
    CHECK(near(r.decode_res, 1 / 0.075) && !strcmp(r.decode_res_bound, "DRAM"), "decode %g %s", r.decode_res, r.decode_res_bound);
    base(&pm, &mc);
    mr_plan_predict(&pm, &mc, 1024ull * 11000000 + 5, &r); /* every pair fits */
    CHECK(r.cache_frac == 1 && near(r.decode_paged_uniform, r.decode_res), "a full arena pages nothing");
}

static void test_paged(void) {
    mr_plan_model pm;
    mr_plan_machine mc;
    mr_plan_result r;
    base(&pm, &mc);
    mr_plan_predict(&pm, &mc, 256ull * 11000000 + 100, &r); /* 256 slots: a quarter of the pairs */
    CHECK(near(r.cache_frac, 0.25) && near(r.hit_uniform, 0.25), "frac %g", r.cache_frac);
    CHECK(near(r.hit_skewed, 0.4362), "skewed hit %g (the table's 25 %% entry)", r.hit_skewed);
    /* uniform: 0.15 s + 5e8 x 0.75 / 1e9 = 0.525 s; skewed: 0.15 + 5e8 x 0.5638 / 1e9 */
    CHECK(near(r.decode_paged_uniform, 1 / 0.525) && !strcmp(r.decode_paged_bound, "disk"), "paged %g %s",
          r.decode_paged_uniform, r.decode_paged_bound);
    CHECK(near(r.decode_paged_skewed, 1 / (0.15 + 0.5 * 0.5638)), "skewed %g", r.decode_paged_skewed);
    /* prefill: a 512-token batch touches 1 - (1 - 6/256)^512 of the 1024 experts, 3/4 of them missing:
     * (5e8 / 6) x 1024 x touched x 0.75 / 1e9 s of reading against 512 / 50 s of compute */
    double io = 5e8 / 6 * 1024 * (1 - pow(1 - 6.0 / 256, 512)) * 0.75 / 1e9;
    CHECK(near(r.prefill_paged, 512 / io) && !strcmp(r.prefill_bound, "disk"), "prefill paged %g (want %g)",
          r.prefill_paged, 512 / io);
    mc.disk_gbs = 100; /* a fast device: prefill stays compute-bound, decode CPU-bound */
    mr_plan_predict(&pm, &mc, 256ull * 11000000, &r);
    CHECK(near(r.prefill_paged, 50) && !strcmp(r.prefill_bound, "CPU"), "prefill %g %s", r.prefill_paged, r.prefill_bound);
    CHECK(!strcmp(r.decode_paged_bound, "CPU"), "decode bound %s", r.decode_paged_bound);
}

static void test_skew_table(void) {
    CHECK(mr_plan_hit_skewed(0) == 0 && mr_plan_hit_skewed(1) == 1, "ends");
    CHECK(near(mr_plan_hit_skewed(0.05), 0.0552), "5 %%: %g", mr_plan_hit_skewed(0.05));
    CHECK(near(mr_plan_hit_skewed(0.075), (0.0552 + 0.1818) / 2), "7.5 %%: %g", mr_plan_hit_skewed(0.075));
    double prev = 0;
    int mono = 1;
    for (int i = 1; i <= 100; i++) {
        double h = mr_plan_hit_skewed(i / 100.0);
        if (h < prev || h < i / 100.0 - 1e-9) mono = 0; /* rising, and never below uniform routing */
        prev = h;
    }
    CHECK(mono, "the skewed bound must rise with the cache and stay above the uniform one");
}

/* a synthesized deepseek4 with a bundled MTP block: the MTP block's experts are bytes of the file but
 * not of a token; the sums over the tensor table add up */
static void test_read(void) {
    char path[256];
    snprintf(path, sizeof path, "%s/mtp.gguf", dir);
    mr_synth_params sp = {.shape = "deepseek-v4-tiny", .mix = "q8_0", .seed = 3, .layout = "mtp"};
    if (mr_synth(path, &sp)) { CHECK(0, "synth: %s", mr_last_error()); return; }
    mr_plan_model pm;
    if (mr_plan_read(path, &pm)) { CHECK(0, "read: %s", mr_last_error()); return; }
    CHECK(!strcmp(pm.arch, "deepseek4") && pm.n_layer == 5 && pm.n_moe_layer == 4, "arch %s, %d layers, %d MoE",
          pm.arch, pm.n_layer, pm.n_moe_layer);
    CHECK(pm.n_expert == 4 && pm.n_expert_used == 2, "%d experts top-%d", pm.n_expert, pm.n_expert_used);
    CHECK(pm.dense_bytes + pm.routed_bytes == pm.file_bytes, "dense + routed != all tensors");
    /* 2 of 4 experts in each of the 4 trunk layers: half of the trunk's routed bytes (the MTP block's 1/5) */
    CHECK(near(pm.routed_per_token, (double)pm.routed_bytes * 4 / 5 / 2), "routed per token %g of %llu",
          pm.routed_per_token, (unsigned long long)pm.routed_bytes);
    double tb = 0;
    for (int i = 0; i < pm.n_types; i++) tb += pm.type_bytes[i];
    CHECK(tb > pm.routed_per_token && tb <= pm.routed_per_token + pm.dense_per_token, "type table %g", tb);
    CHECK(pm.slot_bytes > 0, "slot bytes");
    snprintf(path, sizeof path, "%s/dense.gguf", dir);
    mr_synth_params dp = {.shape = "llama-tiny", .mix = "q4_0", .seed = 1};
    if (mr_synth(path, &dp)) { CHECK(0, "synth: %s", mr_last_error()); return; }
    CHECK(mr_plan_read(path, &pm) == 0 && pm.routed_bytes == 0 && pm.n_expert == 0, "dense model");
    CHECK(mr_plan_read("/nonexistent.gguf", &pm) == -1 && strstr(mr_last_error(), "nonexistent"), "missing file");
}

int main(void) {
    if (!mkdtemp(dir)) { printf("FAIL mkdtemp\n"); return 1; }
    RUN(test_resident);
    RUN(test_paged);
    RUN(test_skew_table);
    RUN(test_read);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) printf("# could not remove %s\n", dir);
    return t_finish();
}
