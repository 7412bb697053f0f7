/* atomic.c - output files written to a temporary name beside the target
 * and renamed into place, so a failed run never leaves half a file. The file
 * gets the mode any other tool would give it (0666 less the umask). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

int atomic_open(atomic_file *af, const char *path) {
    memset(af, 0, sizeof *af);
    if (strlen(path) + 16 >= sizeof af->tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    snprintf(af->path, sizeof af->path, "%s", path);
    snprintf(af->tmp, sizeof af->tmp, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(af->tmp);
    if (fd < 0) return -1;
    /* mkstemp makes the file 0600 */
    mode_t mask = umask(0);
    umask(mask);
    if (fchmod(fd, 0666 & ~mask) != 0 || !(af->f = fdopen(fd, "w"))) {
        int e = errno;
        close(fd);
        unlink(af->tmp);
        errno = e;
        return -1;
    }
    return 0;
}

int atomic_commit(atomic_file *af) {
    errno = 0;
    int bad = fflush(af->f) != 0 || ferror(af->f) || fsync(fileno(af->f)) != 0;
    int e = errno;
    if (fclose(af->f) != 0 && !bad) bad = 1, e = errno;
    af->f = NULL;
    if (!bad) {
        if (rename(af->tmp, af->path) == 0) return 0;
        e = errno;
    }
    unlink(af->tmp);
    errno = e ? e : EIO; /* the reason, for the caller's message */
    return -1;
}

void atomic_abort(atomic_file *af) {
    int e = errno;
    if (af->f) fclose(af->f);
    af->f = NULL;
    unlink(af->tmp);
    errno = e;
}
