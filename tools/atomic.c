/* atomic.c - output files: a regular file (or a new name) is written with
 * no name (an anonymous file, O_TMPFILE, in its folder) and linked in when
 * complete, so a failed or killed run, SIGKILL included, leaves nothing;
 * where the file system has no anonymous files, it is written to a
 * temporary name beside it and renamed into place. A symbolic link is
 * followed and its target written that way in the target's folder, the
 * link kept; standard output ("-"), a FIFO or a character device is
 * written straight through, never replaced; anything else is refused
 * (ppv_output_target). The file gets the mode any other tool would give it
 * (0666 less the umask). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

/* Sets af->why to e's text and returns -1 with errno e. */
static int failed(atomic_file *af, int e) {
    snprintf(af->why, sizeof af->why, "%s", strerror(e ? e : EIO));
    errno = e ? e : EIO;
    return -1;
}

int atomic_open(atomic_file *af, const char *path) {
    memset(af, 0, sizeof *af);
    ppv_output_kind kind;
    char err[4600];
    if (ppv_output_target(path, af->path, sizeof af->path, &kind, err, sizeof err) < 0) {
        size_t n = strlen(path); /* the reason, after "path: " */
        const char *why = strncmp(err, path, n) == 0 && err[n] == ':' ? err + n + 2 : err;
        snprintf(af->why, sizeof af->why, "%.*s", (int)(sizeof af->why - 1), why);
        errno = EINVAL;
        return -1;
    }
    if (kind == PPV_OUTPUT_STREAM) {
        af->stream = 1;
        af->f = strcmp(af->path, "-") == 0 ? stdout : fopen(af->path, "w");
        return af->f ? 0 : failed(af, errno);
    }
    if (strlen(af->path) + 12 > 4095) return failed(af, ENAMETOOLONG);
    snprintf(af->tmp, sizeof af->tmp, "%s.tmp.XXXXXX", af->path);
    int fd = ppv_output_anon_open(af->path);
    if (fd >= 0) {
        if ((af->f = fdopen(fd, "w"))) return af->anon = 1, 0;
        close(fd);
    }
    fd = mkstemp(af->tmp);
    if (fd < 0) return failed(af, errno);
    /* mkstemp makes the file 0600 */
    mode_t mask = umask(0);
    umask(mask);
    if (fchmod(fd, 0666 & ~mask) != 0 || !(af->f = fdopen(fd, "w"))) {
        int e = errno;
        close(fd);
        unlink(af->tmp);
        return failed(af, e);
    }
    return 0;
}

int atomic_commit(atomic_file *af) {
    errno = 0;
    if (af->stream) { /* straight through: flushed, and closed unless standard output */
        int bad = fflush(af->f) != 0 || ferror(af->f);
        int e = errno;
        if (af->f != stdout && fclose(af->f) != 0 && !bad) bad = 1, e = errno;
        af->f = NULL;
        return bad ? failed(af, e) : 0;
    }
    int bad = fflush(af->f) != 0 || ferror(af->f) || fsync(fileno(af->f)) != 0;
    int e = errno;
    if (af->anon) { /* linked in while the descriptor is open */
        if (!bad && ppv_output_anon_place(fileno(af->f), af->path, af->tmp, sizeof af->tmp) < 0)
            bad = 1, e = errno;
        if (fclose(af->f) != 0 && !bad) bad = 1, e = errno;
        af->f = NULL;
        return bad ? failed(af, e) : 0;
    }
    if (fclose(af->f) != 0 && !bad) bad = 1, e = errno;
    af->f = NULL;
    if (!bad) {
        if (rename(af->tmp, af->path) == 0) return 0;
        e = errno;
    }
    unlink(af->tmp);
    return failed(af, e); /* the reason, for the caller's message */
}

void atomic_abort(atomic_file *af) {
    int e = errno;
    if (af->f && af->f != stdout) fclose(af->f);
    af->f = NULL;
    if (!af->stream && !af->anon) unlink(af->tmp);
    errno = e;
}
