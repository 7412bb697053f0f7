/* load.c - the format-neutral loader: a schedule from a file, standard
 * input or text, read as ppv's native format when its first word says so
 * and as PyTorch's CSV otherwise.
 */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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
    char *buf = big ? ppv_alloc_big(cap) : malloc(cap);
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
