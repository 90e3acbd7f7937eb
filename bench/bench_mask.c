/* Cost of the JSON masks (response_format json_object / json_schema, forced tool calls) against a
 * decode step: per round, a plain reply and a constrained one (the same seeds, temperature 1),
 * alternating; the mask's time per token (mr_gen_stats.mask_s / n_mask) beside the plain reply's
 * decode step (decode_s / n_decode) and their ratio. Run on a quiet machine:
 *   build/bench/bench_mask [MODEL] [--threads N] [--rounds R] [--tokens T]
 * (default ../shared/models/kjv-moe-q8_0.gguf, 1 thread, 5 rounds, 120 tokens, 4 replies each). */
#include "moerun.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *SCHEMA =
    "{\"type\": \"object\", \"properties\": {\"book\": {\"enum\": [\"Genesis\", \"Exodus\", \"Psalms\", \"John\"]},"
    " \"chapter\": {\"type\": \"integer\"}, \"verses\": {\"type\": \"array\", \"items\": {\"type\": \"integer\"}, \"maxItems\": 4},"
    " \"note\": {\"type\": \"string\"}, \"holy\": {\"type\": \"boolean\"}}, \"required\": [\"book\", \"chapter\", \"holy\"]}";

/* 4 replies of up to tokens each; the generator's counters summed */
static int replies(mr_session *s, const int32_t *toks, int nt, const char *schema, int tokens, int round, mr_gen_stats *sum) {
    memset(sum, 0, sizeof *sum);
    for (int k = 0; k < 4; k++) {
        mr_gen_params p;
        mr_gen_params_default(&p);
        p.sampler.temperature = 1.0f;
        p.sampler.seed = (uint64_t)(round * 16 + k + 1);
        p.max_tokens = tokens;
        p.json_schema = schema;
        mr_session_reset(s);
        mr_gen *g = mr_gen_new(s, &p);
        if (!g || mr_gen_prefill(g, toks, nt)) { mr_gen_free(g); return -1; }
        mr_gen_step st = {0};
        while (!st.finish)
            if (mr_gen_next(g, &st)) { mr_gen_free(g); return -1; }
        mr_gen_stats gs;
        mr_gen_get_stats(g, &gs);
        sum->n_decode += gs.n_decode;
        sum->decode_s += gs.decode_s;
        sum->n_mask += gs.n_mask;
        sum->mask_s += gs.mask_s;
        sum->n_gen += gs.n_gen;
        mr_gen_free(g);
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *path = "../shared/models/kjv-moe-q8_0.gguf";
    int threads = 1, rounds = 5, tokens = 120;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) tokens = atoi(argv[++i]);
        else if (argv[i][0] != '-') path = argv[i];
        else { fprintf(stderr, "usage: bench_mask [MODEL] [--threads N] [--rounds R] [--tokens T]\n"); return 2; }
    }
    mr_model_params mp;
    mr_model_params_default(&mp);
    mp.n_threads = threads;
    mr_model *m = mr_model_load(path, &mp);
    if (!m) { fprintf(stderr, "error: %s\n", mr_last_error()); return 1; }
    mr_session *s = mr_session_new(m, 512);
    int32_t toks[64];
    const char *prompt = "Answer in JSON. ";
    const int nt = mr_tokenize(mr_model_tokenizer(m), prompt, strlen(prompt), 1, 0, toks, 64);
    if (!s || nt <= 0) { fprintf(stderr, "error: %s\n", mr_last_error()); return 1; }
    printf("model %s, %d thread%s, vocabulary %d, %d rounds of 4 + 4 replies of up to %d tokens\n", path, threads,
           threads > 1 ? "s" : "", (int)mr_model_n_vocab(m), rounds, tokens);
    printf("round  plain step us  constrained step us  mask us/token  mask / plain step\n");
    double sum_ratio = 0, sum_mask = 0, sum_plain = 0;
    for (int r = 0; r < rounds; r++) {
        mr_gen_stats plain, con;
        if (replies(s, toks, nt, NULL, tokens, r, &plain) || replies(s, toks, nt, SCHEMA, tokens, r, &con)) {
            fprintf(stderr, "error: %s\n", mr_last_error());
            return 1;
        }
        const double ps = 1e6 * plain.decode_s / plain.n_decode, cs = 1e6 * con.decode_s / con.n_decode;
        const double mk = con.n_mask ? 1e6 * con.mask_s / con.n_mask : 0;
        printf("%5d  %13.1f  %19.1f  %13.1f  %16.2f%%\n", r, ps, cs, mk, 100 * mk / ps);
        sum_ratio += mk / ps;
        sum_mask += mk;
        sum_plain += ps;
    }
    printf("mean   %13.1f  %19s  %13.1f  %16.2f%%\n", sum_plain / rounds, "", sum_mask / rounds, 100 * sum_ratio / rounds);
    mr_session_free(s);
    mr_model_free(m);
    return 0;
}
