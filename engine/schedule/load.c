/* load.c - the format-neutral loader: a schedule from a file, standard
 * input or text, read as ppv's native format when its first word says so
 * and as PyTorch's CSV otherwise.
 */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "schedule_internal.h"

/* Native or CSV by the first word. */
static int parse_text(const char *text, size_t len, const char *name, ppv_dialect dialect,
                      int places, ppv_schedule **out, char *err, size_t errlen) {
    *out = NULL;
    if (ppv_refuse_nul(text, len, name, err, errlen) < 0) return -1;
    size_t i = 0;
    while (i < len && isspace((unsigned char)text[i])) i++;
    if (len - i >= 12 && memcmp(text + i, "ppv-schedule", 12) == 0)
        return ppv_parse_native(text, len, name, places, out, err, errlen);
    return ppv_parse_csv(text, len, name, dialect, places, out, err, errlen);
}

int ppv_schedule_parse_text(const char *text, size_t len, const char *name, ppv_dialect dialect,
                            ppv_schedule **out, char *err, size_t errlen) {
    return parse_text(text, len, name, dialect, 1, out, err, errlen);
}

int ppv_output_target(const char *path, char *resolved, size_t n, ppv_output_kind *kind,
                      char *err, size_t errlen) {
    if (strcmp(path, "-") == 0) {
        *kind = PPV_OUTPUT_STREAM;
        snprintf(resolved, n, "-");
        return 0;
    }
    char cur[4096], link[4096];
    if (strlen(path) >= sizeof cur) return ppv_errf(err, errlen, "%s: path too long", path);
    snprintf(cur, sizeof cur, "%s", path);
    for (int hops = 0; hops <= 40; hops++) {
        struct stat st;
        if (lstat(cur, &st) != 0) {
            if (errno != ENOENT) return ppv_errf(err, errlen, "%s: %s", path, strerror(errno));
            *kind = PPV_OUTPUT_FILE; /* a new name (its folder is checked when it is written) */
            break;
        }
        if (S_ISLNK(st.st_mode)) {
            ssize_t len = readlink(cur, link, sizeof link - 1);
            if (len < 0) return ppv_errf(err, errlen, "%s: %s", path, strerror(errno));
            link[len] = '\0';
            if (link[0] == '/') {
                snprintf(cur, sizeof cur, "%s", link);
            } else { /* relative to the link's folder */
                char *slash = strrchr(cur, '/');
                size_t dir = slash ? (size_t)(slash - cur) + 1 : 0;
                if (dir + (size_t)len >= sizeof cur)
                    return ppv_errf(err, errlen, "%s: the link's target path is too long", path);
                memcpy(cur + dir, link, (size_t)len + 1);
            }
            continue;
        }
        if (S_ISREG(st.st_mode)) *kind = PPV_OUTPUT_FILE;
        else if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) *kind = PPV_OUTPUT_STREAM;
        else if (S_ISDIR(st.st_mode))
            return ppv_errf(err, errlen, "%s: a directory, not a file to write", path);
        else
            return ppv_errf(err, errlen,
                            "%s: not a regular file, FIFO or character device (a socket or block "
                            "device is never written over)",
                            path);
        break;
    }
    struct stat st;
    if (lstat(cur, &st) == 0 && S_ISLNK(st.st_mode))
        return ppv_errf(err, errlen, "%s: more than 40 symbolic links (a loop?)", path);
    if (strlen(cur) >= n) return ppv_errf(err, errlen, "%s: path too long", path);
    snprintf(resolved, n, "%s", cur);
    return 0;
}

const char *ppv_path_name(const char *path) {
    return strcmp(path, "-") == 0 ? "<stdin>" : path;
}

/* Gives back buf: a ppv_alloc_big block where big, else a malloc one. */
static void give_back(char *buf, int big) {
    if (big)
        ppv_free_big(buf);
    else
        free(buf);
}

/* buf (n bytes used) in a block of cap bytes, or NULL with buf given back. */
static char *grow(char *buf, size_t n, size_t cap, int big) {
    if (!big) {
        char *nb = realloc(buf, cap);
        if (!nb) free(buf);
        return nb;
    }
    char *nb = ppv_alloc_big(cap);
    if (nb) memcpy(nb, buf, n);
    ppv_free_big(buf);
    return nb;
}

/* A regular file's first len bytes, read in runs side by side. */
typedef struct read_job {
    int fd;
    char *buf;
    size_t len;
    int short_run[PPV_MAX_RUNS]; /* the run's read failed or came short */
} read_job;

/* The file's MiB [from, to) into buf (ppv_runs). */
static void read_run(void *arg, int32_t run, int32_t from, int32_t to) {
    read_job *j = arg;
    size_t at = (size_t)from << 20, end = (size_t)to << 20;
    if (end > j->len) end = j->len;
    while (at < end) {
        ssize_t got = pread(j->fd, j->buf + at, end - at, (off_t)at);
        if (got <= 0) {
            j->short_run[run] = 1;
            return;
        }
        at += (size_t)got;
    }
}

/* The first len bytes of regular file f into buf, a MiB a part, in runs
 * side by side (a 9 MB file's copy took a millisecond of one processor),
 * f left at their end: len, or 0 where a run came short (the file shrank)
 * or there was no room (f is then still at its start). */
static size_t read_side_by_side(FILE *f, char *buf, size_t len) {
    int32_t mibs = (int32_t)((len + ((size_t)1 << 20) - 1) >> 20);
    int64_t *ends = malloc(((size_t)mibs + 1) * sizeof *ends);
    if (!ends) return 0;
    read_job j;
    memset(&j, 0, sizeof j);
    j.fd = fileno(f), j.buf = buf, j.len = len;
    for (int32_t k = 0; k <= mibs; k++) ends[k] = k;
    ppv_runs(ppv_run_count((int64_t)len, (int64_t)1 << 20, mibs), ends, mibs, read_run, &j);
    free(ends);
    for (int k = 0; k < PPV_MAX_RUNS; k++)
        if (j.short_run[k]) return 0;
    return fseeko(f, (off_t)len, SEEK_SET) == 0 ? len : 0;
}

/* ppv_file_read, into a ppv_alloc_big block where big. */
static char *read_file(const char *path, size_t *len, int big, char *err, size_t errlen) {
    *len = 0;
    int is_stdin = strcmp(path, "-") == 0;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f) {
        ppv_errf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    path = ppv_path_name(path);
    /* a file's own size, and a byte more to see its end: read at once */
    struct stat st;
    size_t cap = 1 << 16, n = 0;
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
        (uint64_t)st.st_size < SIZE_MAX / 4)
        cap = (size_t)st.st_size + 1;
    if (big && cap > (size_t)1 << 20) ppv_helpers_wake(); /* its rows are read in runs */
    char *buf = big ? ppv_alloc_big(cap) : malloc(cap);
    /* a big file's size in runs, then on as below from there (to see
     * its end, or what it grew by) */
    if (buf && big && !is_stdin && cap > (size_t)2 << 20) n = read_side_by_side(f, buf, cap - 1);
    for (;;) {
        if (!buf) {
            ppv_errf(err, errlen, "%s: out of memory", path);
            break;
        }
        if (n == cap) { /* a pipe, or a file that grew */
            if (cap > SIZE_MAX / 4) {
                give_back(buf, big);
                buf = NULL;
                continue;
            }
            buf = grow(buf, n, cap * 2, big);
            cap *= 2;
            continue;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    if (buf && ferror(f)) {
        ppv_errf(err, errlen, "%s: read error: %s", path, strerror(errno));
        give_back(buf, big);
        buf = NULL;
    }
    if (!is_stdin) fclose(f);
    *len = buf ? n : 0;
    return buf;
}

char *ppv_file_read(const char *path, size_t *len, char *err, size_t errlen) {
    return read_file(path, len, 0, err, errlen);
}

static int load(const char *path, ppv_dialect dialect, int places, ppv_schedule **out, char *err,
                size_t errlen) {
    *out = NULL;
    size_t len;
    char *buf = read_file(path, &len, 1, err, errlen);
    if (!buf) return -1;
    int rc = parse_text(buf, len, ppv_path_name(path), dialect, places, out, err, errlen);
    ppv_free_big(buf);
    return rc;
}

int ppv_schedule_load(const char *path, ppv_dialect dialect, ppv_schedule **out, char *err,
                      size_t errlen) {
    return load(path, dialect, 1, out, err, errlen);
}

int ppv_schedule_load_placeless(const char *path, ppv_dialect dialect, ppv_schedule **out,
                                char *err, size_t errlen) {
    return load(path, dialect, 0, out, err, errlen);
}
