/* Expert parallelism over MPI (built with `make MPI=1`; src/ep/ep_none.c otherwise).
 *
 * Every rank loads the same GGUF (its own mapping and its own pager / --ram-budget) and owns a share
 * of the routed experts: (layer, expert) goes to rank (layer + expert) % size, so each rank holds
 * n_expert / size experts of every layer (all experts of a layer have the same size: balanced by
 * bytes). Rank 0 runs the command; its expert engine (model/moe.c) asks owns() for every expert of a
 * batch and submits the remote ones (the routed rows and their weights go to the owners) before it
 * computes its own, then collects y = down_e(SwiGLU(gate_e x, up_e x)) from each owner. The owner computes y with the
 * same engine on the same rows, so rank 0's weighted sum (in routing order) is byte-identical to a
 * single process at any rank count. Ranks > 0 only serve (mr_ep_serve) until rank 0 says stop.
 *
 * Per MoE layer and batch, rank 0 sends each other rank one request before its own experts run (they
 * overlap): int32 {op = 2, layer, n_jobs, d, total rows, 0, 0, 0, then (expert, cnt) per job}, the
 * mr_moe_cfg (bias and guess_next NULL), then floats x[total][d] and w[total]; the reply (tag EP_TAG_REP) is
 * y[total][d], read after rank 0's local experts, or (tag EP_TAG_ERR) the owner's error message when
 * it could not compute them: rank 0's eval then fails with it. op 0 = stop.
 *
 * State: one ep_mpi per process (MPI is joined once per process), created by mr_ep_start and freed by
 * mr_ep_stop; the engine reaches it only as the remote's ctx. The file keeps just the pointer to it,
 * for the public mr_ep_* calls. The serving side calls the engine through mr_moe_serve (moe.h), not
 * into the model's fields. */
#include "moerun.h"
#include "moerun_tools.h"
#include "base/base.h"
#include "model/moe.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

enum { EP_TAG_REQ = 71, EP_TAG_REP = 72, EP_TAG_ERR = 73 };
#define EP_ERR_MAX 1024 /* bytes of an error message sent instead of a reply */

/* Requests of one batch to one rank: sent by submit(), answered before collect() returns. */
typedef struct {
    int32_t *meta;            /* head[8], then (expert, cnt) per job */
    float *data;              /* rows [total][d], then weights [total] */
    size_t meta_cap, data_cap;
    float *reply;             /* y of all its jobs [total][d] */
    size_t reply_cap;
    int total, n_jobs;
    MPI_Request req[3];
} ep_peer;

typedef struct {
    int rank, size;
    uint64_t sent_rows, calls;   /* rank 0: rows and expert jobs sent to the other ranks */
    ep_peer *peers;              /* [size] */
    /* the batch between submit() and collect(): a copy of the engine's jobs (their y pointers) */
    mr_moe_job *jobs;
    size_t jobs_cap;
    int n_jobs, d, layer;
    mr_moe_cfg cfg;              /* as sent: pointers of this process cleared */
    mr_moe_remote remote;        /* ctx = this */
} ep_mpi;

static ep_mpi *ep; /* this process's transport; NULL until mr_ep_start(--ep), again after mr_ep_stop */

static int ep_owner(const ep_mpi *t, int layer, int e) { return (layer + e) % t->size; }

static int ep_owns(void *ctx, int layer, int e) { return ep_owner(ctx, layer, e) != 0; }

static int ep_reserve(void **p, size_t *cap, size_t bytes) {
    if (bytes <= *cap) return 0;
    void *n = mr_realloc(*p, bytes);
    if (!n) { mr_set_error("ep: out of memory for %zu bytes", bytes); return -1; }
    *p = n;
    *cap = bytes;
    return 0;
}

/* Send every remote job of this batch: one message set per rank (its jobs' rows and weights). */
static int ep_submit(void *ctx, int layer, const mr_moe_cfg *c, const float *x, int64_t d, const mr_moe_job *jobs, int n_jobs) {
    ep_mpi *t = ctx;
    for (int r = 1; r < t->size; r++) t->peers[r].n_jobs = 0;
    if (ep_reserve((void **)&t->jobs, &t->jobs_cap, sizeof *jobs * (size_t)(n_jobs + 1))) return -1;
    memcpy(t->jobs, jobs, sizeof *jobs * (size_t)n_jobs);
    t->n_jobs = n_jobs;
    t->d = (int)d;
    t->layer = layer;
    t->cfg = *c;
    t->cfg.bias = NULL;
    t->cfg.guess_next = NULL; /* pointers of this process: meaningless on the owner */
    t->cfg.guess_ctx = NULL;
    for (int r = 1; r < t->size; r++) {
        ep_peer *p = &t->peers[r];
        p->n_jobs = p->total = 0;
        for (int j = 0; j < n_jobs; j++)
            if (ep_owner(t, layer, jobs[j].e) == r) { p->n_jobs++; p->total += jobs[j].cnt; }
        if (!p->n_jobs) continue;
        /* on a failure, the ranks already sent to are answered by collect(); this one and the
         * following ones were sent nothing (n_jobs 0: collect skips them) */
        if (ep_reserve((void **)&p->meta, &p->meta_cap, sizeof(int32_t) * (size_t)(8 + 2 * p->n_jobs)) ||
            ep_reserve((void **)&p->data, &p->data_cap, sizeof(float) * (size_t)p->total * (size_t)(d + 1))) {
            p->n_jobs = 0;
            return -1;
        }
        int32_t *mt = p->meta;
        mt[0] = 2; mt[1] = layer; mt[2] = p->n_jobs; mt[3] = (int32_t)d; mt[4] = p->total; mt[5] = mt[6] = mt[7] = 0;
        float *rows = p->data, *wv = p->data + (size_t)p->total * (size_t)d;
        int k = 0, row = 0;
        for (int j = 0; j < n_jobs; j++) {
            if (ep_owner(t, layer, jobs[j].e) != r) continue;
            mt[8 + 2 * k] = jobs[j].e;
            mt[9 + 2 * k] = jobs[j].cnt;
            k++;
            for (int i = 0; i < jobs[j].cnt; i++, row++) {
                memcpy(rows + (size_t)row * (size_t)d, x + (int64_t)jobs[j].tok[i] * d, sizeof(float) * (size_t)d);
                wv[row] = jobs[j].w[i];
            }
        }
        if (MPI_Isend(p->meta, 8 + 2 * p->n_jobs, MPI_INT32_T, r, EP_TAG_REQ, MPI_COMM_WORLD, &p->req[0]) != MPI_SUCCESS ||
            MPI_Isend(&t->cfg, (int)sizeof t->cfg, MPI_BYTE, r, EP_TAG_REQ, MPI_COMM_WORLD, &p->req[1]) != MPI_SUCCESS ||
            MPI_Isend(p->data, (int)((size_t)p->total * (size_t)(d + 1)), MPI_FLOAT, r, EP_TAG_REQ, MPI_COMM_WORLD, &p->req[2]) != MPI_SUCCESS) {
            mr_set_error("ep: MPI send to rank %d failed", r);
            p->n_jobs = 0;
            return -1;
        }
        t->calls += (uint64_t)p->n_jobs;
        t->sent_rows += (uint64_t)p->total;
    }
    return 0;
}

/* rank r's answer to this batch: y into p->reply, or -1 on its error message (EP_TAG_ERR) or a
 * failed receive, set as ours when report */
static int ep_receive(ep_peer *p, int r, size_t n, int report) {
    MPI_Status st;
    if (MPI_Probe(r, MPI_ANY_TAG, MPI_COMM_WORLD, &st) != MPI_SUCCESS) {
        if (report) mr_set_error("ep: MPI receive from rank %d failed", r);
        return -1;
    }
    if (st.MPI_TAG == EP_TAG_ERR) {
        char msg[EP_ERR_MAX + 1] = "";
        int len = 0;
        MPI_Get_count(&st, MPI_CHAR, &len);
        if (len < 0 || len > EP_ERR_MAX) len = EP_ERR_MAX; /* the sender keeps to the bound */
        MPI_Recv(msg, len, MPI_CHAR, r, EP_TAG_ERR, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        msg[len] = 0;
        if (report) mr_set_error("ep: rank %d: %s", r, msg);
        return -1;
    }
    if (ep_reserve((void **)&p->reply, &p->reply_cap, sizeof(float) * n) ||
        MPI_Recv(p->reply, (int)n, MPI_FLOAT, r, EP_TAG_REP, MPI_COMM_WORLD, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
        if (report) mr_set_error("ep: MPI receive from rank %d failed", r);
        return -1;
    }
    return 0;
}

/* Receive every rank's outputs and put each job's rows where the engine wants them. Every rank sent
 * to is answered (also after an error), so no reply is left for the next batch; the first error is
 * the one reported. */
static int ep_collect(void *ctx) {
    ep_mpi *t = ctx;
    int rc = 0;
    for (int r = 1; r < t->size; r++) {
        ep_peer *p = &t->peers[r];
        if (!p->n_jobs) continue;
        const int bad = ep_receive(p, r, (size_t)p->total * (size_t)t->d, !rc);
        MPI_Waitall(3, p->req, MPI_STATUSES_IGNORE);
        if (bad) { rc = -1; p->n_jobs = 0; continue; }
        size_t off = 0;
        for (int j = 0; j < t->n_jobs; j++) {
            if (ep_owner(t, t->layer, t->jobs[j].e) != r) continue;
            const size_t len = (size_t)t->jobs[j].cnt * (size_t)t->d;
            memcpy(t->jobs[j].y, p->reply + off, sizeof(float) * len);
            off += len;
        }
        p->n_jobs = 0;
    }
    return rc;
}

int mr_ep_start(int *argc, char ***argv) {
    int want = 0, k = 0;
    for (int i = 0; i < *argc; i++) {
        if (!strcmp((*argv)[i], "--ep")) { want = 1; continue; }
        (*argv)[k++] = (*argv)[i];
    }
    (*argv)[k] = NULL;
    *argc = k;
    if (!want) return 0;
    /* the server evaluates on its connections' threads, one at a time (its model lock): MPI is
     * called from several threads, never at once */
    int prov;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &prov) != MPI_SUCCESS) { mr_set_error("ep: MPI_Init failed"); return -1; }
    if (prov < MPI_THREAD_SERIALIZED) {
        mr_set_error("ep: the MPI library does not support calls from several threads (MPI_THREAD_SERIALIZED)");
        MPI_Finalize();
        return -1;
    }
    ep_mpi *t = mr_calloc(1, sizeof *t);
    if (t) {
        MPI_Comm_rank(MPI_COMM_WORLD, &t->rank);
        MPI_Comm_size(MPI_COMM_WORLD, &t->size);
        t->peers = mr_calloc((size_t)t->size, sizeof *t->peers);
    }
    if (!t || !t->peers) {
        free(t);
        mr_set_error("ep: out of memory");
        MPI_Finalize();
        return -1;
    }
    t->remote = (mr_moe_remote){.ctx = t, .owns = ep_owns, .submit = ep_submit, .collect = ep_collect};
    ep = t;
    return t->rank;
}

int mr_ep_active(void) { return ep != NULL; }
int mr_ep_rank(void) { return ep ? ep->rank : 0; }
int mr_ep_size(void) { return ep ? ep->size : 1; }

int mr_ep_attach(mr_model *m) {
    if (!ep || ep->size < 2) return 0;
    mr_moe_set_remote(m, &ep->remote);
    return 0;
}

/* One request's buffers on a serving rank, grown as requests need. */
typedef struct {
    ep_peer in;               /* meta, data (rows then weights) and reply as on rank 0 */
    int32_t *sel;             /* the expert of each row */
    float *w1;                /* the weight each row's y comes times */
    size_t sel_cap, w_cap;
} ep_request;

/* Receive one request into q (its head first: op 0 = stop, returns 1); -1 when MPI fails. */
static int ep_receive_request(const ep_mpi *t, ep_request *q, mr_moe_cfg *cfg) {
    MPI_Status st;
    /* the head comes first, with the job list after it in the same message */
    if (MPI_Probe(0, EP_TAG_REQ, MPI_COMM_WORLD, &st) != MPI_SUCCESS) return -1;
    int nmeta;
    MPI_Get_count(&st, MPI_INT32_T, &nmeta);
    if (nmeta < 8 || ep_reserve((void **)&q->in.meta, &q->in.meta_cap, sizeof(int32_t) * (size_t)nmeta)) return -1;
    MPI_Recv(q->in.meta, nmeta, MPI_INT32_T, 0, EP_TAG_REQ, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (q->in.meta[0] == 0) return 1;
    const int total = q->in.meta[4];
    const int64_t d = q->in.meta[3];
    MPI_Recv(cfg, (int)sizeof *cfg, MPI_BYTE, 0, EP_TAG_REQ, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (ep_reserve((void **)&q->in.data, &q->in.data_cap, sizeof(float) * (size_t)total * (size_t)(d + 1)) ||
        ep_reserve((void **)&q->in.reply, &q->in.reply_cap, sizeof(float) * (size_t)total * (size_t)d) ||
        ep_reserve((void **)&q->sel, &q->sel_cap, sizeof(int32_t) * (size_t)total) ||
        ep_reserve((void **)&q->w1, &q->w_cap, sizeof(float) * (size_t)total)) {
        fprintf(stderr, "ep rank %d: %s\n", t->rank, mr_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Recv(q->in.data, (int)((size_t)total * (size_t)(d + 1)), MPI_FLOAT, 0, EP_TAG_REQ, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    return 0;
}

int mr_ep_serve(mr_model *m) {
    if (!ep) { mr_set_error("ep: not started (--ep)"); return -1; }
    const ep_mpi *t = ep;
    ep_request q = {0};
    uint64_t n_req = 0, n_rows = 0, n_err = 0;
    mr_moe_cfg cfg;
    while (ep_receive_request(t, &q, &cfg) == 0) {
        const int32_t *meta = q.in.meta;
        const int layer = meta[1], nj = meta[2], total = meta[4];
        const int64_t d = meta[3];
        const float *wv = q.in.data + (size_t)total * (size_t)d;
        /* one slot per row; every job's rows in the order rank 0 gathers them, so each expert's
         * product runs over the same columns as on rank 0. y comes times w when the weight goes
         * before the down product, otherwise times 1 (exact): rank 0 applies w in its sum */
        int row = 0;
        for (int j = 0; j < nj; j++)
            for (int i = 0; i < meta[9 + 2 * j]; i++, row++) {
                q.sel[row] = meta[8 + 2 * j];
                q.w1[row] = cfg.weight_before_down ? wv[row] : 1.0f;
            }
        cfg.n_used = 1;
        cfg.bias = NULL;
        cfg.guess_next = NULL;
        cfg.guess_ctx = NULL;
        if (row != total) {
            fprintf(stderr, "ep rank %d: malformed request\n", t->rank);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        /* a model file that shrank or a failed product (a pager read error, out of memory): rank
         * 0's eval fails with the message, this rank goes on serving (a later request may succeed,
         * e.g. after a transient read error) */
        if (mr_moe_serve(m, layer, &cfg, q.in.data, total, q.sel, q.w1, q.in.reply)) {
            const char *e = mr_last_error();
            size_t len = strlen(e);
            if (len > EP_ERR_MAX) len = EP_ERR_MAX;
            fprintf(stderr, "ep rank %d: %s\n", t->rank, e);
            MPI_Send(e, (int)len, MPI_CHAR, 0, EP_TAG_ERR, MPI_COMM_WORLD);
            n_err++;
            continue;
        }
        MPI_Send(q.in.reply, (int)((size_t)total * (size_t)d), MPI_FLOAT, 0, EP_TAG_REP, MPI_COMM_WORLD);
        n_req += (uint64_t)nj;
        n_rows += (uint64_t)total;
    }
    /* one write for the whole line: mpirun forwards each rank's writes as they come, so a line made
     * of several writes can be cut by rank 0's own summary */
    char failed[48] = "";
    if (n_err) snprintf(failed, sizeof failed, ", %llu batches failed", (unsigned long long)n_err);
    fprintf(stderr, "ep: rank %d of %d served %llu expert requests (%llu token rows)%s\n", t->rank, t->size,
            (unsigned long long)n_req, (unsigned long long)n_rows, failed);
    mr_pager_print_summary(stderr, m, 0, 0, 0, 0);
    free(q.in.meta); free(q.in.data); free(q.in.reply); free(q.sel); free(q.w1);
    return 0;
}

void mr_ep_stop(void) {
    ep_mpi *t = ep;
    if (!t) return;
    if (t->rank == 0) {
        int32_t head[8] = {0};
        for (int r = 1; r < t->size; r++) MPI_Send(head, 8, MPI_INT32_T, r, EP_TAG_REQ, MPI_COMM_WORLD);
        if (t->size > 1)
            fprintf(stderr, "ep: rank 0 of %d sent %llu expert requests (%llu token rows) to the other ranks\n", t->size,
                    (unsigned long long)t->calls, (unsigned long long)t->sent_rows);
    }
    for (int r = 0; r < t->size; r++) { free(t->peers[r].meta); free(t->peers[r].data); free(t->peers[r].reply); }
    free(t->peers);
    free(t->jobs);
    free(t);
    ep = NULL;
    MPI_Finalize();
}
