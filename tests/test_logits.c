/* Golden logits for the llama / mixtral-style / qwen3moe entries of shared/golden/manifest.tsv:
 * prefill (one batch) vs .prefill.lgts and decode (one token at a time through the KV cache) vs
 * .decode.lgts, each by its tolerance class. Other architectures have their own tests. */
#include "golden_logits.h"
#include "test.h"

static const char *arch_of(const char *model) {
    static char arch[64];
    char rel[256];
    snprintf(rel, sizeof rel, "models/%.200s.gguf", model);
    mr_model_params p;
    mr_model_params_default(&p);
    arch[0] = 0;
    /* cheap: the architecture is read from metadata by a load; these models are tiny */
    mr_model *m = mr_model_load(t_shared(rel), &p);
    if (m) { snprintf(arch, sizeof arch, "%s", mr_model_arch(m)); mr_model_free(m); }
    return arch;
}

int main(void) {
    (void)t_case_name; (void)t_case_failed;
    tg_entry e[64];
    int n = tg_manifest(e, 64);
    if (n <= 0) { printf("FAIL manifest: cannot read %s\n", t_shared("golden/manifest.tsv")); return 1; }
    mr_model_params mp;
    mr_model_params_default(&mp);
    for (int i = 0; i < n; i++) {
        if (strstr(e[i].model, "deepseek4")) continue; /* tests/test_logits_ds4*.c */
        const char *arch = arch_of(e[i].model);
        if (strcmp(arch, "llama") && strcmp(arch, "qwen3moe")) {
            printf("FAIL %s: architecture '%s' (%s)\n", e[i].model, arch, arch[0] ? "not llama/qwen3moe" : mr_last_error());
            t_failed++;
            continue;
        }
        for (int decode = 0; decode < 2; decode++) {
            mr_logits_cmp c;
            char why[512];
            int r = tg_check_golden(&e[i], &mp, decode, &c, why, sizeof why);
            const char *path = decode ? "decode" : "prefill";
            if (r == 1) { printf("ok %s.%s [%s] %s\n", e[i].model, path, e[i].cls, why); t_passed++; }
            else { printf("FAIL %s.%s [%s]: %s\n", e[i].model, path, e[i].cls, why); t_failed++; }
            fflush(stdout);
        }
    }
    return t_finish();
}
