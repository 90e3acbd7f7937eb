/* CLI plumbing: every tools/cmd_*.c registers its subcommand with MR_COMMAND, so adding a command
 * never edits a shared table. Commands use only the public header include/moerun.h. */
#ifndef MR_CLI_H
#define MR_CLI_H
typedef int (*mr_cmd_fn)(int argc, char **argv); /* argv[0] is the subcommand name; returns exit status */
void mr_cli_register(const char *name, const char *summary, mr_cmd_fn fn);
#define MR_COMMAND(name, summary, fn) \
    static void __attribute__((constructor)) mr_register_##name(void) { mr_cli_register(#name, summary, fn); }
/* Parse sizes like 512M, 8G, 1.5G, 4096 (bytes). Returns -1 on a malformed value. */
int mr_cli_parse_size(const char *s, unsigned long long *out);
#endif
