/* libFuzzer target for the sampler parameters: any temperature, top_k, top_p, min_p, repetition
 * penalty and window, presence / frequency penalties (NaN, infinities, negatives, huge values),
 * logit biases (any ids, repeats, any values), any vocabulary size up to 4096, logits with NaN/inf,
 * accepted history with out-of-range ids. Input: the parameters' raw bytes, then the vocabulary size,
 * biases, history and logits (older seeds end before the newer fields: those read as zeros). Checks:
 * creation fails only with a message; every draw is an id in range and never a token banned by a
 * bias of -100 unless every token is; after a reset the same draws come again (the seed decides). */
#include "moerun.h"
#include "base/base.h"
#include "fuzz_common.h"

#include <math.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_in in = {data, size};
    mr_sampler_params p;
    p.temperature = fuzz_f32(&in);
    p.top_k = (int32_t)fuzz_u32(&in);
    p.top_p = fuzz_f32(&in);
    p.min_p = fuzz_f32(&in);
    p.repeat_penalty = fuzz_f32(&in);
    p.repeat_last_n = (int32_t)fuzz_u32(&in);
    p.seed = (uint64_t)fuzz_u32(&in) << 32 | fuzz_u32(&in);
    int32_t nv = (int32_t)(fuzz_u32(&in) % 4097) - 1; /* -1 .. 4095: bad sizes included */
    int n_hist = fuzz_u8(&in), n_draw = fuzz_u8(&in) % 8 + 1;
    p.presence_penalty = fuzz_f32(&in);
    p.frequency_penalty = fuzz_f32(&in);
    int32_t bias_ids[16];
    float bias_vals[16];
    p.n_bias = fuzz_u8(&in) % 17;
    for (int i = 0; i < p.n_bias; i++) { bias_ids[i] = (int32_t)(fuzz_u32(&in) % 4100) - 2; bias_vals[i] = fuzz_f32(&in); }
    p.bias_ids = bias_ids;
    p.bias_vals = bias_vals;

    mr_clear_error();
    mr_sampler *s = mr_sampler_new(&p, nv);
    /* the history window is allocated: bounded (found by this target: 2^31-1 asked for 8 GiB) */
    FUZZ_CHECK(!s || p.repeat_last_n <= MR_SAMPLER_MAX_LAST_N);
    if (!s) {
        FUZZ_CHECK(strcmp(mr_get_error(), "unknown error"));
        return 0;
    }
    FUZZ_CHECK(nv > 0);
    int32_t *hist = malloc(sizeof *hist * (size_t)(n_hist ? n_hist : 1));
    float *logits = malloc(sizeof *logits * (size_t)nv);
    FUZZ_CHECK(hist && logits);
    for (int i = 0; i < n_hist; i++) hist[i] = (int32_t)fuzz_u32(&in) % (nv + 2) - 1; /* -1 .. nv */
    /* logits: from the input while it lasts, then a fixed pattern (finite, with ties) */
    for (int32_t i = 0; i < nv; i++) logits[i] = in.n >= 4 ? fuzz_f32(&in) : (float)(i % 7) - 3.0f;
    int32_t first[8];
    for (int round = 0; round < 2; round++) {
        mr_sampler_reset(s);
        for (int i = 0; i < n_hist; i++) mr_sampler_accept(s, hist[i]);
        mr_sampler_begin_reply(s);
        for (int k = 0; k < n_draw; k++) {
            int32_t id = mr_sampler_sample(s, logits);
            FUZZ_CHECK(id >= 0 && id < nv);
            int banned = 0; /* a ban holds while some token is possible (finite logit, finite penalties) */
            for (int i = 0; i < p.n_bias; i++) banned |= bias_ids[i] == id && bias_vals[i] <= -MR_SAMPLER_BIAS_MAX;
            int others = 0;
            for (int32_t t = 0; t < nv && !others; t++) {
                int b = 0;
                for (int i = 0; i < p.n_bias; i++) b |= bias_ids[i] == t && bias_vals[i] <= -MR_SAMPLER_BIAS_MAX;
                others = !b && isfinite(logits[t]) && fabsf(logits[t]) < 1e30f;
            }
            FUZZ_CHECK(!banned || !others || !isfinite(p.presence_penalty) || !isfinite(p.frequency_penalty) ||
                       fabsf(p.presence_penalty) > 1e30f || fabsf(p.frequency_penalty) > 1e30f || !(p.repeat_penalty < 1e30f) ||
                       !(p.temperature < 1e30f));
            if (round == 0) first[k] = id;
            else FUZZ_CHECK(first[k] == id);
            mr_sampler_accept(s, id);
        }
    }
    free(logits);
    free(hist);
    mr_sampler_free(s);
    return 0;
}
