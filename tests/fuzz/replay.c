/* Runs files through a fuzz target's LLVMFuzzerTestOneInput without libFuzzer: `make test` replays
 * the kept seeds and every crash found so far (tests/fuzz/corpus/NAME, tests/fuzz/crashes/NAME)
 * so each fix stays fixed. Usage: fuzz_NAME FILE|DIR...; prints "ok fuzz_NAME_replay (N inputs)". */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "cannot open %s\n", path); return -1; }
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    for (size_t k; buf && (k = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += k;
        if (n == cap) { uint8_t *nb = realloc(buf, cap *= 2); if (!nb) { free(buf); buf = NULL; } else buf = nb; }
    }
    fclose(f);
    if (!buf) { fprintf(stderr, "out of memory reading %s\n", path); return -1; }
    /* an exact-size copy so ASan sees reads past the input */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact) { free(buf); return -1; }
    memcpy(exact, buf, n);
    free(buf);
    fprintf(stderr, "replay %s (%zu bytes)\n", path, n);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    const char *name = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    long count = 0;
    for (int a = 1; a < argc; a++) {
        struct stat st;
        if (stat(argv[a], &st) != 0) continue; /* a target may have no crashes directory */
        if (!S_ISDIR(st.st_mode)) { if (run_file(argv[a]) == 0) count++; continue; }
        DIR *d = opendir(argv[a]);
        if (!d) continue;
        char **names = NULL;
        size_t nn = 0;
        for (struct dirent *e; (e = readdir(d)) != NULL;) {
            if (e->d_name[0] == '.') continue;
            char **nb = realloc(names, (nn + 1) * sizeof *names);
            if (!nb) break;
            names = nb;
            size_t l = strlen(argv[a]) + strlen(e->d_name) + 2;
            if (!(names[nn] = malloc(l))) break;
            snprintf(names[nn++], l, "%s/%s", argv[a], e->d_name);
        }
        closedir(d);
        qsort(names, nn, sizeof *names, cmp_str);
        for (size_t i = 0; i < nn; i++) { if (run_file(names[i]) == 0) count++; free(names[i]); }
        free(names);
    }
    printf("ok %s_replay (%ld inputs)\n", name, count);
    return 0;
}
