/* moerun synth: the file loads, has the shape's tensors, and random blocks have the intended scale. */
#include "test.h"
#include "moerun.h"
#include "gguf/gguf.h"
#include "quant/quant.h"

#include <math.h>
#include <unistd.h>

static void test_synth_qwen3_iq3s_mxfp4(void) {
    char path[] = "/tmp/mr_synth_XXXXXX.gguf";
    int fd = mkstemps(path, 5);
    CHECK(fd >= 0, "mkstemps");
    if (fd < 0) return;
    close(fd);
    mr_synth_params p = {"qwen3-small", "iq3s-mxfp4", 1, 1.0f, 7};
    CHECK(mr_synth(path, &p) == 0, "synth: %s", mr_last_error());
    mr_gguf *g = mr_gguf_open(path);
    CHECK(g != NULL, "open: %s", mr_last_error());
    if (!g) { unlink(path); return; }
    uint32_t n_layer = 0, n_exp = 0;
    CHECK(mr_gguf_get_u32(g, "qwen3moe.block_count", &n_layer) == 0 && n_layer == 1, "block_count %u", n_layer);
    CHECK(mr_gguf_get_u32(g, "qwen3moe.expert_count", &n_exp) == 0 && n_exp == 64, "expert_count %u", n_exp);
    const mr_gguf_tensor *gate = mr_gguf_find_tensor(g, "blk.0.ffn_gate_exps.weight");
    const mr_gguf_tensor *down = mr_gguf_find_tensor(g, "blk.0.ffn_down_exps.weight");
    CHECK(gate && gate->type == MR_TYPE_IQ3_S && gate->ne[0] == 1024 && gate->ne[1] == 512 && gate->ne[2] == 64, "gate");
    CHECK(down && down->type == MR_TYPE_MXFP4 && down->ne[0] == 512 && down->ne[1] == 1024, "down");
    if (gate && down) {
        /* weights ~ N(0, 1/fan_in): the RMS of a dequantized row is near 1/sqrt(ne0) */
        const mr_gguf_tensor *ts[2] = {gate, down};
        for (int i = 0; i < 2; i++) {
            const mr_gguf_tensor *t = ts[i];
            float row[1024];
            const mr_type_traits *tt = mr_type_get(t->type);
            size_t rs = mr_row_size(t->type, t->ne[0]);
            double ss = 0;
            int nrow = 64;
            for (int r = 0; r < nrow; r++) {
                tt->to_float((const uint8_t *)t->data + (size_t)r * 997 % (size_t)(t->ne[1] * t->ne[2]) * rs, row, t->ne[0]);
                for (int k = 0; k < t->ne[0]; k++) ss += (double)row[k] * row[k];
            }
            double rms = sqrt(ss / (nrow * (double)t->ne[0])), want = 1.0 / sqrt((double)t->ne[0]);
            CHECK(rms > 0.5 * want && rms < 2.0 * want, "%s rms %g, want ~%g", t->name, rms, want);
        }
    }
    mr_gguf_close(g);
    unlink(path);
}

static void test_synth_errors(void) {
    mr_synth_params p = {"no-such-shape", "q4_0", 1, 0, 1};
    CHECK(mr_synth("/tmp/never.gguf", &p) != 0 && strstr(mr_last_error(), "unknown shape"), "shape: %s", mr_last_error());
    mr_synth_params q = {"qwen3-small", "no-such-mix", 1, 0, 1};
    CHECK(mr_synth("/tmp/never.gguf", &q) != 0 && strstr(mr_last_error(), "unknown quant mix"), "mix: %s", mr_last_error());
}

int main(void) {
    RUN(test_synth_qwen3_iq3s_mxfp4);
    RUN(test_synth_errors);
    return t_finish();
}
