/* The option table behind every command's parsing and --help (see cli.h): each option lists all its
 * spellings (moerun's and llama.cpp's), takes "--opt value" or "--opt=value", and options that do not
 * apply on a CPU engine are accepted with a one-line notice. */
#include "cli.h"
#include "moerun.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <unistd.h>

/* 1 if `name` is one of the comma-separated spellings in `names` */
static int opt_has_name(const char *names, const char *name, size_t len) {
    for (const char *p = names; *p;) {
        while (*p == ' ' || *p == ',') p++;
        const char *e = p;
        while (*e && *e != ',' && *e != ' ') e++;
        if ((size_t)(e - p) == len && !strncmp(p, name, len)) return 1;
        p = e;
    }
    return 0;
}

/* the first spelling, for messages */
static void opt_first(const char *names, char *buf, size_t n) {
    size_t l = strcspn(names, ", ");
    snprintf(buf, n, "%.*s", (int)l, names);
}

static const mr_opt *opt_find(const mr_opt *o, int n, const char *name, size_t len) {
    for (int i = 0; i < n; i++)
        if (opt_has_name(o[i].names, name, len)) return &o[i];
    return NULL;
}

/* values llama.cpp's -fa takes in newer versions (older ones take none) */
static int is_onoff(const char *v) {
    return v && (!strcmp(v, "on") || !strcmp(v, "off") || !strcmp(v, "auto") || !strcmp(v, "0") || !strcmp(v, "1"));
}

int mr_cli_parse(const char *cmd, const mr_opt *opts, int n_opts, void (*usage)(FILE *), int argc, char **argv,
                 const char **pos, int max_pos, int *n_pos) {
    int np = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 1; }
        if (a[0] != '-' || !a[1]) { /* a positional argument ("-" alone is one: stdin) */
            if (np >= max_pos) {
                fprintf(stderr, "error: unexpected argument '%s' (see moerun %s --help)\n", a, cmd);
                return -1;
            }
            pos[np++] = a;
            continue;
        }
        /* --opt=value */
        const char *eq = a[1] == '-' ? strchr(a, '=') : NULL;
        size_t nl = eq ? (size_t)(eq - a) : strlen(a);
        const mr_opt *o = opt_find(opts, n_opts, a, nl);
        if (!o) {
            fprintf(stderr, "error: unknown option '%.*s' (see moerun %s --help)\n", (int)nl, a, cmd);
            return -1;
        }
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)nl, a);
        const char *v = eq ? eq + 1 : NULL;
        int takes = o->arg != NULL && o->kind != MR_OPT_NOTICE_OPT;
        if (o->kind == MR_OPT_NOTICE_OPT && !v && i + 1 < argc && is_onoff(argv[i + 1])) v = argv[++i];
        if (takes && !v) {
            if (i + 1 >= argc) { fprintf(stderr, "error: %s needs a value (%s)\n", name, o->arg); return -1; }
            v = argv[++i];
        }
        if (!takes && v && o->kind != MR_OPT_NOTICE_OPT) {
            fprintf(stderr, "error: %s takes no value\n", name);
            return -1;
        }
        int bad = 0;
        switch (o->kind) {
        case MR_OPT_FLAG: *(int *)o->dst = o->ival; break;
        case MR_OPT_INT: bad = mr_cli_int(name, v, (long)o->lo, (long)o->hi, (int *)o->dst); break;
        case MR_OPT_FLOAT: bad = mr_cli_float(name, v, o->lo, o->hi, (float *)o->dst); break;
        case MR_OPT_U64: bad = mr_cli_u64(name, v, (uint64_t *)o->dst); break;
        case MR_OPT_STR: *(const char **)o->dst = v; break;
        case MR_OPT_FN: bad = o->fn(name, v, o->dst); break;
        case MR_OPT_NOTICE: case MR_OPT_NOTICE_ARG: case MR_OPT_NOTICE_OPT:
            fprintf(stderr, "notice: %s ignored: %s\n", name, o->help);
            break;
        default: bad = -1;
        }
        if (bad) return -1;
    }
    if (n_pos) *n_pos = np;
    return 0;
}

void mr_cli_print_opts(FILE *f, const mr_opt *opts, int n_opts) {
    for (int i = 0; i < n_opts; i++) {
        const mr_opt *o = &opts[i];
        char left[128];
        snprintf(left, sizeof left, "  %s%s%s%s", o->names, o->arg ? " " : "", o->arg ? o->arg : "",
                 o->kind == MR_OPT_NOTICE_OPT ? " [on|off]" : "");
        /* a long left column gets a line of its own; help lines after the first are indented */
        if (strlen(left) > 26) fprintf(f, "%s\n%-27s", left, "");
        else fprintf(f, "%-26s ", left);
        if (o->kind >= MR_OPT_NOTICE) fprintf(f, "ignored: ");
        for (const char *p = o->help; *p;) {
            const char *e = strchr(p, '\n');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            fprintf(f, "%.*s\n", (int)len, p);
            if (!e) break;
            p = e + 1;
            if (*p) fprintf(f, "%-27s", "");
        }
    }
}

/* ---- shared option values ---- */

int mr_cli_opt_seed(const char *opt, const char *v, void *dst) {
    mr_cli_common *c = dst;
    if (mr_cli_u64(opt, v, &c->sp.seed)) return -1;
    c->seed_set = 1;
    return 0;
}

int mr_cli_opt_repeat_penalty(const char *opt, const char *v, void *dst) {
    float *r = dst;
    if (mr_cli_float(opt, v, 0, MR_CLI_BIG, r)) return -1;
    if (!(*r > 0)) {
        fprintf(stderr, "error: bad value '%s' for %s (want a number > 0; 1 = off)\n", v, opt);
        return -1;
    }
    return 0;
}

int mr_cli_opt_graph(const char *opt, const char *v, void *dst) {
    static const char *names[] = {[MR_GRAPH_OFFICIAL] = "official", [MR_GRAPH_MAINLINE] = "mainline", [MR_GRAPH_FORK] = "fork"};
    for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++)
        if (!strcmp(v, names[i])) { *(int *)dst = i; return 0; }
    fprintf(stderr, "error: bad value '%s' for %s (want official, mainline or fork)\n", v, opt);
    return -1;
}

int mr_cli_opt_approx(const char *opt, const char *v, void *dst) {
    const char *key = !strcmp(opt, "--moe-prune") ? "prune" : !strcmp(opt, "--moe-tau") ? "tau"
                    : !strcmp(opt, "--moe-skip") ? "skip" : "";
    char spec[256];
    if (*key) snprintf(spec, sizeof spec, "%s=%s", key, v);
    else snprintf(spec, sizeof spec, "%s", v);
    if (*key && strpbrk(v, " ,\t")) { fprintf(stderr, "error: bad value '%s' for %s\n", v, opt); return -1; }
    if (mr_approx_parse(spec, dst)) { fprintf(stderr, "error: %s %s: %s\n", opt, v, mr_last_error()); return -1; }
    return 0;
}

void mr_cli_common_init(mr_cli_common *c) {
    memset(c, 0, sizeof *c);
    mr_model_params_default(&c->mp);
    mr_cli_env_apply(&c->mp);
    mr_sampler_default_params(&c->sp);
    mr_approx_params_default(&c->ap);
    c->n_batch = 512;
}

/* A seed from the clock, the process id and the address space layout: different on every run. */
uint64_t mr_cli_random_seed(void) {
    uint64_t x = (uint64_t)(mr_cli_now() * 1e9) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&x;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x & 0xffffffffull; /* printable and easy to type back with --seed */
}

void mr_cli_pick_seed(mr_cli_common *c) {
    if (!c->seed_set) c->sp.seed = mr_cli_random_seed();
    fprintf(stderr, "seed: %llu\n", (unsigned long long)c->sp.seed);
}
