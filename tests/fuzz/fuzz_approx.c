/* libFuzzer target for the MoE approximation specs (mr_approx_parse through mr_approx_file_parse: the
 * text of --moe-approx, chat's /approx, the control file and POST /v1/admin/moe). Input: the text (at
 * most MR_APPROX_FILE_MAX bytes, as the control file allows). Checks: a refusal comes with a message;
 * an accepted setting formats to a spec that parses again to a setting that formats the same (what
 * responses report is itself a valid spec). */
#include "moerun.h"
#include "base/base.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > MR_APPROX_FILE_MAX) return 0;
    char text[MR_APPROX_FILE_MAX + 1];
    memcpy(text, data, size);
    text[size] = 0;
    mr_approx_params p;
    mr_clear_error();
    if (mr_approx_file_parse(text, &p)) {
        FUZZ_CHECK(strcmp(mr_get_error(), "unknown error"));
        return 0;
    }
    char a[512], b[512];
    int n = mr_approx_format(&p, a, sizeof a);
    FUZZ_CHECK(n > 0 && (size_t)n < sizeof a);
    mr_approx_params q;
    FUZZ_CHECK(mr_approx_file_parse(a, &q) == 0);
    FUZZ_CHECK(mr_approx_params_enabled(&p) == mr_approx_params_enabled(&q));
    mr_approx_format(&q, b, sizeof b);
    FUZZ_CHECK(!strcmp(a, b));
    return 0;
}
