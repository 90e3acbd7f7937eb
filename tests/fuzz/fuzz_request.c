/* libFuzzer target for the request parser (srv_req_parse): the input as a JSON body, parsed for each
 * API (completions, chat, Anthropic messages, Responses: with its conversation, srv_resp_input, on a
 * small store that each accepted input joins, so later inputs can name it). Checks: a refusal always says why; an accepted request
 * holds only bounded values (stop strings, n, penalties, logit_bias entries with distinct
 * non-negative ids, speculative draft lengths), and its sampler settings make a sampler for a small
 * vocabulary or fail with a message (ids beyond it). */
#include "server/request.h"
#include "server/responses.h"
#include "base/base.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mr_json *j = mr_json_parse((const char *)data, size);
    if (!j) return 0;
    static srv_store *store;
    if (!store) store = srv_store_new(4, 1 << 16);
    for (int api = SRV_API_COMPLETIONS; api <= SRV_API_RESPONSES; api++) {
        srv_req r;
        srv_resp rs = {0};
        char err[512] = "";
        int status = 400;
        if (srv_req_parse(j, api, &r, err, sizeof err) ||
            (api == SRV_API_RESPONSES && srv_resp_input(store, j, &r, &rs, &status, err, sizeof err))) {
            FUZZ_CHECK(err[0] && (status == 400 || status == 404));
            srv_req_free(&r);
            srv_resp_free(&rs);
            continue;
        }
        if (api == SRV_API_RESPONSES) { /* a conversation of known roles, calls within the pool */
            FUZZ_CHECK(r.n_msgs >= 1);
            int nc = 0;
            for (int i = 0; i < r.n_msgs; i++) {
                FUZZ_CHECK(r.msgs[i].role && (r.msgs[i].content || r.msgs[i].n_tool_calls));
                nc += r.msgs[i].n_tool_calls;
            }
            FUZZ_CHECK(nc == r.n_calls);
            srv_resp_save(&rs, "resp_1", "", 0);
            srv_resp_free(&rs);
        }
        FUZZ_CHECK(r.n_stop >= 0 && r.n_stop <= SRV_MAX_STOP && r.n >= 1 && r.n <= SRV_MAX_N);
        FUZZ_CHECK(r.sp.presence_penalty >= -2 && r.sp.presence_penalty <= 2);
        FUZZ_CHECK(r.sp.frequency_penalty >= -2 && r.sp.frequency_penalty <= 2);
        FUZZ_CHECK(r.sp.repeat_last_n >= -1 && r.sp.repeat_last_n <= MR_SAMPLER_MAX_LAST_N);
        FUZZ_CHECK(r.spec_max >= -1 && r.spec_max <= 64 && r.spec_min >= 0 && r.spec_min <= 64);
        FUZZ_CHECK(r.n_bias >= 0 && r.n_bias <= SRV_MAX_LOGIT_BIAS && r.sp.n_bias == r.n_bias);
        for (int i = 0; i < r.n_bias; i++) {
            FUZZ_CHECK(r.bias_ids[i] >= 0 && r.bias_vals[i] == r.bias_vals[i]);
            for (int k = 0; k < i; k++) FUZZ_CHECK(r.bias_ids[k] != r.bias_ids[i]);
        }
        /* the server checks ids against its vocabulary first; the sampler refuses the rest with a message */
        mr_sampler_params sp = r.sp;
        if (sp.repeat_last_n < 0) sp.repeat_last_n = 256;
        mr_clear_error();
        mr_sampler *s = mr_sampler_new(&sp, 64);
        if (s) {
            float logits[64];
            for (int i = 0; i < 64; i++) logits[i] = (float)(i % 5);
            int32_t id = mr_sampler_sample(s, logits);
            FUZZ_CHECK(id >= 0 && id < 64);
            mr_sampler_accept(s, id);
            id = mr_sampler_sample(s, logits);
            FUZZ_CHECK(id >= 0 && id < 64);
            mr_sampler_free(s);
        } else {
            FUZZ_CHECK(strcmp(mr_get_error(), "unknown error"));
        }
        srv_req_free(&r);
    }
    mr_json_free(j);
    return 0;
}
