#include "moerun_tools.h"
#include "base/prof.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MR_PROF_MAX_OPS 96

typedef struct { char op[32]; double sec[2]; uint64_t calls[2]; } mr_prof_entry;

int mr_prof_on;
static mr_prof_entry mr_prof_tab[MR_PROF_MAX_OPS];
static int mr_prof_n, mr_prof_phase;
static uint64_t mr_prof_ntok[2], mr_prof_nevals[2];
static double mr_prof_wall[2];

void mr_profile_enable(int on) { mr_prof_on = on; }

void mr_profile_reset(void) {
    memset(mr_prof_tab, 0, sizeof mr_prof_tab);
    mr_prof_n = 0;
    memset(mr_prof_ntok, 0, sizeof mr_prof_ntok);
    memset(mr_prof_nevals, 0, sizeof mr_prof_nevals);
    memset(mr_prof_wall, 0, sizeof mr_prof_wall);
}

void mr_prof_set_phase(int phase) { mr_prof_phase = phase ? 1 : 0; }

void mr_prof_tokens(int phase, int n_tokens) {
    if (!mr_prof_on) return;
    phase = phase ? 1 : 0;
    mr_prof_ntok[phase] += (uint64_t)n_tokens;
    mr_prof_nevals[phase]++;
}

void mr_profile_eval_time(int phase, double sec) { mr_prof_wall[phase ? 1 : 0] += sec; }

void mr_prof_add(const char *op, double sec) {
    int i;
    for (i = 0; i < mr_prof_n; i++)
        if (!strncmp(mr_prof_tab[i].op, op, sizeof mr_prof_tab[i].op - 1)) break;
    if (i == mr_prof_n) {
        if (mr_prof_n == MR_PROF_MAX_OPS) return;
        snprintf(mr_prof_tab[mr_prof_n++].op, sizeof mr_prof_tab[0].op, "%s", op);
    }
    mr_prof_tab[i].sec[mr_prof_phase] += sec;
    mr_prof_tab[i].calls[mr_prof_phase]++;
}

void mr_prof_add_matmul(const char *name, double sec) {
    char op[32];
    if (!name) name = "?";
    if (!strncmp(name, "blk.", 4)) { /* drop "blk.N." */
        const char *p = name + 4;
        while (*p >= '0' && *p <= '9') p++;
        if (*p == '.') name = p + 1;
    }
    size_t n = strlen(name);
    if (n > 7 && !strcmp(name + n - 7, ".weight")) n -= 7;
    snprintf(op, sizeof op, "mm %.*s", (int)n, name);
    mr_prof_add(op, sec);
}

static int mr_prof_cmp_phase;
static int mr_prof_cmp(const void *a, const void *b) {
    double x = ((const mr_prof_entry *)a)->sec[mr_prof_cmp_phase], y = ((const mr_prof_entry *)b)->sec[mr_prof_cmp_phase];
    return x < y ? 1 : x > y ? -1 : 0;
}

/* "parent/child" names are sub-operators: timed inside the parent's bracket, so they are listed
 * under it (indented) and left out of the totals */
static int mr_prof_is_child_of(const char *op, const char *parent) {
    size_t n = strlen(parent);
    return !strncmp(op, parent, n) && op[n] == '/';
}

static int mr_prof_has_parent(const mr_prof_entry *tab, int n, const char *op) {
    const char *slash = strchr(op, '/');
    if (!slash) return 0;
    for (int i = 0; i < n; i++)
        if (!strchr(tab[i].op, '/') && mr_prof_is_child_of(op, tab[i].op)) return 1;
    return 0;
}

void mr_profile_report(FILE *out) {
    static const char *names[2] = {"prefill", "decode"};
    for (int ph = 0; ph < 2; ph++) {
        if (!mr_prof_ntok[ph]) continue;
        double total = 0;
        for (int i = 0; i < mr_prof_n; i++)
            if (!mr_prof_has_parent(mr_prof_tab, mr_prof_n, mr_prof_tab[i].op)) total += mr_prof_tab[i].sec[ph];
        double wall = mr_prof_wall[ph] > 0 ? mr_prof_wall[ph] : total;
        double ntok = (double)mr_prof_ntok[ph];
        fprintf(out, "\n%s: %llu tokens in %llu evals, %.3f ms/token (%.2f tok/s); operators:\n", names[ph],
                (unsigned long long)mr_prof_ntok[ph], (unsigned long long)mr_prof_nevals[ph], 1e3 * wall / ntok,
                ntok / wall);
        fprintf(out, "  %-28s %12s %12s %8s\n", "operator", "calls/token", "ms/token", "share");
        mr_prof_cmp_phase = ph;
        mr_prof_entry sorted[MR_PROF_MAX_OPS];
        memcpy(sorted, mr_prof_tab, sizeof sorted);
        qsort(sorted, (size_t)mr_prof_n, sizeof sorted[0], mr_prof_cmp);
        for (int i = 0; i < mr_prof_n; i++) {
            if (!sorted[i].calls[ph] || mr_prof_has_parent(sorted, mr_prof_n, sorted[i].op)) continue;
            fprintf(out, "  %-28s %12.2f %12.3f %7.1f%%\n", sorted[i].op, (double)sorted[i].calls[ph] / ntok,
                    1e3 * sorted[i].sec[ph] / ntok, 100.0 * sorted[i].sec[ph] / wall);
            for (int k = 0; k < mr_prof_n; k++) {
                if (!sorted[k].calls[ph] || !mr_prof_is_child_of(sorted[k].op, sorted[i].op)) continue;
                char sub[48];
                snprintf(sub, sizeof sub, "  . %s", sorted[k].op + strlen(sorted[i].op) + 1);
                fprintf(out, "  %-28s %12.2f %12.3f %7.1f%%\n", sub, (double)sorted[k].calls[ph] / ntok,
                        1e3 * sorted[k].sec[ph] / ntok, 100.0 * sorted[k].sec[ph] / wall);
            }
        }
        if (wall > total)
            fprintf(out, "  %-28s %12s %12.3f %7.1f%%\n", "(unattributed)", "", 1e3 * (wall - total) / ntok,
                    100.0 * (wall - total) / wall);
    }
}
