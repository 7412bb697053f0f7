/* replay_main.c - a main() for the libFuzzer harnesses when there is no
 * libFuzzer (gcc, valgrind): feeds each file named on the command line, or
 * each file of a named folder (sorted by name, one level deep), to
 * LLVMFuzzerTestOneInput once. A harness reports a failure by crashing or
 * aborting, as under libFuzzer, so the exit code is 0 only when every
 * input passed; the file is named on stderr before it runs, so a crash
 * says which one.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Runs the harness on one file. Returns 0, or 1 when it cannot be read. */
static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: %s: cannot open: %s\n", path, strerror(errno));
        return 1;
    }
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (!buf) break;
        if (n == cap) {
            uint8_t *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    int bad = !buf || ferror(f);
    fclose(f);
    if (bad) {
        fprintf(stderr, "replay: %s: cannot read\n", path);
        free(buf);
        return 1;
    }
    fprintf(stderr, "replay: %s (%zu bytes)\n", path, n);
    /* an exact copy, so a read past the end is past the allocation */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact) {
        free(buf);
        return 1;
    }
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs the harness on every regular file of dir, in name order. Returns
 * the number of files that could not be read; *count gets the inputs run. */
static int replay_dir(const char *dir, int *count) {
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "replay: %s: cannot open: %s\n", dir, strerror(errno));
        return 1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **nn = realloc(names, cap * sizeof *nn);
            if (!nn) {
                rc = 1;
                break;
            }
            names = nn;
        }
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        if (!(names[n] = malloc(len))) {
            rc = 1;
            break;
        }
        snprintf(names[n++], len, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, by_name);
    for (size_t k = 0; k < n; k++) {
        struct stat st;
        if (stat(names[k], &st) == 0 && S_ISREG(st.st_mode)) {
            rc += replay_file(names[k]);
            ++*count;
        }
        free(names[k]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv) {
    int count = 0, rc = 0;
    if (argc < 2) {
        fprintf(stderr,
                "usage: %s FILE|DIR...\n"
                "runs the fuzz harness once on each file (a folder: each file in it)\n",
                argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            rc++;
        } else if (S_ISDIR(st.st_mode)) {
            rc += replay_dir(argv[i], &count);
        } else {
            rc += replay_file(argv[i]);
            count++;
        }
    }
    fprintf(stderr, "replay: %d inputs, %d unreadable\n", count, rc);
    return rc ? 1 : 0;
}
