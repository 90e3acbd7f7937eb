/* moerun public API: the only header the CLI, the server and embedding programs use.
 * Conventions: functions return 0 / a pointer on success and -1 / NULL on failure, after which
 * mr_last_error() returns a message. The library never exits the process. */
#ifndef MOERUN_H
#define MOERUN_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

const char *mr_version(void);
const char *mr_last_error(void);
void mr_set_log_level(int level); /* 0 errors, 1 info (default), 2 debug */

/* ---- files and formats (issue 2) ---- */

/* ---- kernels (issue 3) ---- */

/* ---- models, sessions, tokenizer, sampling (issues 4, 5) ---- */

/* ---- expert pager (issue 6) ---- */

/* ---- measurement (issue 7) ---- */

#ifdef __cplusplus
}
#endif
#endif
