/* Expert parallelism over MPI (built with `make MPI=1`; src/ep/ep_none.c otherwise).
 *
 * Every rank loads the same GGUF (its own mapping and its own pager / --ram-budget) and owns a share
 * of the routed experts: (layer, expert) goes to rank (layer + expert) % size, so each rank holds
 * n_expert / size experts of every layer (all experts of a layer have the same size: balanced by
 * bytes). Rank 0 runs the command; its expert engine (model/moe.c) asks owns() for every expert of a
 * batch and calls compute() for the remote ones, which sends the routed rows and their weights to
 * the owner and receives y = down_e(SwiGLU(gate_e x, up_e x)) back. The owner computes y with the
 * same engine on the same rows, so rank 0's weighted sum (in routing order) is byte-identical to a
 * single process at any rank count. Ranks > 0 only serve (mr_ep_serve) until rank 0 says stop.
 *
 * Message (tag EP_TAG_REQ): int32 head[8] = {op, layer, expert, cnt, d, 0, 0, 0}, then the mr_moe_cfg
 * (bias NULL), then x[cnt][d] and w[cnt] as floats. Reply (tag EP_TAG_REP): y[cnt][d]. op 0 = stop. */
#include "moerun.h"
#include "moerun_tools.h"
#include "base/base.h"
#include "model/moe.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

enum { EP_TAG_REQ = 71, EP_TAG_REP = 72 };

static int ep_rank, ep_size, ep_on;
static uint64_t ep_sent_rows, ep_calls;

typedef struct {
    float *buf;       /* request scratch: x rows and weights */
    size_t cap;
} ep_ctx;
static ep_ctx ep_c;

static int ep_owner(int layer, int e) { return (layer + e) % ep_size; }

static int ep_owns(void *ctx, int layer, int e) { (void)ctx; return ep_owner(layer, e) != 0; }

static float *ep_grow(size_t floats) {
    if (floats <= ep_c.cap) return ep_c.buf;
    float *b = mr_realloc(ep_c.buf, sizeof(float) * floats);
    if (!b) { mr_set_error("ep: out of memory for %zu floats", floats); return NULL; }
    ep_c.buf = b;
    ep_c.cap = floats;
    return b;
}

static int ep_compute(void *ctx, int layer, int e, const mr_moe_cfg *c, const float *x, int64_t d, const int *tok,
                      int cnt, const float *w, float *y) {
    (void)ctx;
    const int dst = ep_owner(layer, e);
    float *rows = ep_grow((size_t)cnt * (size_t)d + (size_t)cnt);
    if (!rows) return -1;
    for (int i = 0; i < cnt; i++) memcpy(rows + (size_t)i * (size_t)d, x + (int64_t)tok[i] * d, sizeof(float) * (size_t)d);
    memcpy(rows + (size_t)cnt * (size_t)d, w, sizeof(float) * (size_t)cnt);
    int32_t head[8] = {1, layer, e, cnt, (int32_t)d, 0, 0, 0};
    mr_moe_cfg cfg = *c;
    cfg.bias = NULL;
    if (MPI_Send(head, 8, MPI_INT32_T, dst, EP_TAG_REQ, MPI_COMM_WORLD) != MPI_SUCCESS ||
        MPI_Send(&cfg, (int)sizeof cfg, MPI_BYTE, dst, EP_TAG_REQ, MPI_COMM_WORLD) != MPI_SUCCESS ||
        MPI_Send(rows, (int)((size_t)cnt * (size_t)d + (size_t)cnt), MPI_FLOAT, dst, EP_TAG_REQ, MPI_COMM_WORLD) != MPI_SUCCESS ||
        MPI_Recv(y, (int)((size_t)cnt * (size_t)d), MPI_FLOAT, dst, EP_TAG_REP, MPI_COMM_WORLD, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
        mr_set_error("ep: MPI transfer with rank %d failed", dst);
        return -1;
    }
    ep_sent_rows += (uint64_t)cnt;
    ep_calls++;
    return 0;
}

static const mr_moe_remote ep_remote = {.ctx = NULL, .owns = ep_owns, .compute = ep_compute};

int mr_ep_start(int *argc, char ***argv) {
    int want = 0, k = 0;
    for (int i = 0; i < *argc; i++) {
        if (!strcmp((*argv)[i], "--ep")) { want = 1; continue; }
        (*argv)[k++] = (*argv)[i];
    }
    (*argv)[k] = NULL;
    *argc = k;
    if (!want) return 0;
    int prov;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &prov) != MPI_SUCCESS) { mr_set_error("ep: MPI_Init failed"); return -1; }
    MPI_Comm_rank(MPI_COMM_WORLD, &ep_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ep_size);
    ep_on = 1;
    return ep_rank;
}

int mr_ep_active(void) { return ep_on; }
int mr_ep_rank(void) { return ep_on ? ep_rank : 0; }
int mr_ep_size(void) { return ep_on ? ep_size : 1; }

int mr_ep_attach(mr_model *m) {
    if (!ep_on || ep_size < 2) return 0;
    mr_moe_set_remote(m, &ep_remote);
    return 0;
}

int mr_ep_serve(mr_model *m) {
    float *y = NULL;
    size_t ycap = 0;
    uint64_t n_req = 0, n_rows = 0;
    int32_t *sel = NULL;
    float *w1 = NULL;
    size_t scap = 0;
    for (;;) {
        int32_t head[8];
        if (MPI_Recv(head, 8, MPI_INT32_T, 0, EP_TAG_REQ, MPI_COMM_WORLD, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
        if (head[0] == 0) break;
        const int layer = head[1], e = head[2], cnt = head[3];
        const int64_t d = head[4];
        mr_moe_cfg cfg;
        MPI_Recv(&cfg, (int)sizeof cfg, MPI_BYTE, 0, EP_TAG_REQ, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        float *rows = ep_grow((size_t)cnt * (size_t)d + (size_t)cnt);
        if ((size_t)cnt * (size_t)d > ycap) {
            float *ny = mr_realloc(y, sizeof(float) * (size_t)cnt * (size_t)d);
            if (ny) { y = ny; ycap = (size_t)cnt * (size_t)d; }
        }
        if ((size_t)cnt > scap) {
            int32_t *ns = mr_realloc(sel, sizeof(int32_t) * (size_t)cnt);
            if (ns) sel = ns;
            float *nw = ns ? mr_realloc(w1, sizeof(float) * (size_t)cnt) : NULL;
            if (nw) { w1 = nw; scap = (size_t)cnt; }
        }
        if (!rows || (size_t)cnt * (size_t)d > ycap || (size_t)cnt > scap) {
            fprintf(stderr, "ep rank %d: out of memory\n", ep_rank);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        MPI_Recv(rows, (int)((size_t)cnt * (size_t)d + (size_t)cnt), MPI_FLOAT, 0, EP_TAG_REQ, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        /* one slot per row: the engine gives y (times w when the weight goes before the down
         * product; otherwise times 1, which is exact, and rank 0 applies w in its sum) */
        cfg.n_used = 1;
        cfg.bias = NULL;
        for (int i = 0; i < cnt; i++) { sel[i] = e; w1[i] = cfg.weight_before_down ? rows[(size_t)cnt * (size_t)d + (size_t)i] : 1.0f; }
        if (mr_moe_experts(m, layer, &cfg, rows, cnt, sel, w1, NULL, 0, y)) {
            fprintf(stderr, "ep rank %d: %s\n", ep_rank, mr_last_error());
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        MPI_Send(y, (int)((size_t)cnt * (size_t)d), MPI_FLOAT, 0, EP_TAG_REP, MPI_COMM_WORLD);
        n_req++;
        n_rows += (uint64_t)cnt;
    }
    fprintf(stderr, "ep: rank %d of %d served %llu expert requests (%llu token rows)\n", ep_rank, ep_size,
            (unsigned long long)n_req, (unsigned long long)n_rows);
    mr_pager_print_summary(stderr, m, 0, 0, 0, 0);
    free(y); free(sel); free(w1);
    return 0;
}

void mr_ep_stop(void) {
    if (!ep_on) return;
    if (ep_rank == 0) {
        int32_t head[8] = {0};
        for (int r = 1; r < ep_size; r++) MPI_Send(head, 8, MPI_INT32_T, r, EP_TAG_REQ, MPI_COMM_WORLD);
        if (ep_size > 1)
            fprintf(stderr, "ep: rank 0 of %d sent %llu expert requests (%llu token rows) to the other ranks\n", ep_size,
                    (unsigned long long)ep_calls, (unsigned long long)ep_sent_rows);
    }
    free(ep_c.buf);
    ep_c.buf = NULL;
    ep_c.cap = 0;
    MPI_Finalize();
    ep_on = 0;
}
