/* Progress lines on stderr for load, repack and prefill (only when stderr is a terminal), and the
 * Ctrl-C flag they report back to the library's progress callbacks (see cli.h). */
#include "cli.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

volatile sig_atomic_t mr_cli_interrupted;
static void on_sigint(int sig) { (void)sig; mr_cli_interrupted = 1; }

void mr_cli_catch_sigint(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint; /* no SA_RESTART: Ctrl-C at a prompt interrupts the read */
    sigaction(SIGINT, &sa, NULL);
}

void mr_cli_progress_init(mr_cli_progress *p, const char *what) {
    memset(p, 0, sizeof *p);
    p->what = what;
    p->t0 = mr_cli_now();
    p->tty = isatty(2);
}

/* "prefill: 256/1024 tokens (25%), 85.3 tok/s, ETA 9 s" rewritten in place */
static void progress_line(mr_cli_progress *p, const char *what, const char *unit, int done, int total) {
    if (!p->tty || total <= 0) return;
    double dt = mr_cli_now() - p->t0, rate = dt > 0 ? done / dt : 0;
    char eta[32] = "";
    if (done > 0 && done < total && rate > 0) snprintf(eta, sizeof eta, ", ETA %.0f s", (total - done) / rate);
    fprintf(stderr, "\r\033[K%s: %d/%d %s (%d%%)", what, done, total, unit, (int)(100.0 * done / total));
    if (done > 0 && dt > 0) fprintf(stderr, ", %.1f %s/s%s", rate, unit, eta);
    fflush(stderr);
    p->shown = 1;
}

int mr_cli_progress_gen(void *user, int done, int total) {
    mr_cli_progress *p = user;
    if (done == 0) p->t0 = mr_cli_now();
    progress_line(p, p->what, "tokens", done, total);
    return mr_cli_interrupted != 0;
}

int mr_cli_progress_load(void *user, const char *stage, int done, int total) {
    mr_cli_progress *p = user;
    if (!p->stage || strcmp(p->stage, stage)) { p->stage = stage; p->t0 = mr_cli_now(); }
    progress_line(p, stage, "tensors", done, total);
    return mr_cli_interrupted != 0;
}

void mr_cli_progress_clear(mr_cli_progress *p) {
    if (p->shown) fprintf(stderr, "\r\033[K");
    fflush(stderr);
    p->shown = 0;
}
