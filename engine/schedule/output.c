/* output.c - outputs that have no name until they are complete: an
 * anonymous file (O_TMPFILE) in the target's folder, written, synced and
 * only then linked in, so a writer killed by any signal, SIGKILL included,
 * leaves nothing behind. Where the kernel or the file system has no
 * anonymous files, ppv_output_anon_open says so and the writer falls back
 * to a temporary name. */
#define _GNU_SOURCE /* O_TMPFILE */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "schedule_internal.h"

int ppv_output_anon_open(const char *path) {
    /* the fallback on request: tests of it, or a user who wants no /proc */
    const char *named = getenv("PPV_OUTPUT_NAMED");
    if (named && strcmp(named, "1") == 0) {
        errno = EOPNOTSUPP;
        return -1;
    }
#ifdef O_TMPFILE
    char dir[4096]; /* path's folder */
    if (strlen(path) >= sizeof dir) {
        errno = ENAMETOOLONG;
        return -1;
    }
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else slash[slash == dir] = '\0'; /* "/name" is in "/" */
    /* the mode goes through the umask, as any other tool's new file */
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0666);
    if (fd < 0) return -1;
    /* the file is linked in through /proc: without it, no anonymous file */
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    if (access(proc, F_OK) != 0) {
        close(fd);
        return -1;
    }
    return fd;
#else
    (void)path;
    errno = EOPNOTSUPP;
    return -1;
#endif
}

/* Links fd at name; 0, or -1 with errno (EEXIST: the name is taken). */
static int link_at(int fd, const char *name) {
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    return linkat(AT_FDCWD, proc, AT_FDCWD, name, AT_SYMLINK_FOLLOW);
}

int ppv_output_anon_place(int fd, const char *path, char *tmp, size_t tmplen) {
    if (link_at(fd, path) == 0) return 0; /* a new name: linked straight in */
    if (errno != EEXIST) return -1;
    /* the name is taken: link at a fresh name beside it, then rename over
     * it (the only moment the file has a second name) */
    size_t len = strlen(tmp);
    if (len < 6 || len >= tmplen || strcmp(tmp + len - 6, "XXXXXX") != 0) {
        errno = EINVAL;
        return -1;
    }
    static const char letters[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    unsigned long seq = (unsigned long)getpid() * 2654435761u;
    for (int attempt = 0; attempt < 1000; attempt++, seq = seq * 6364136223846793005u + 1) {
        unsigned long v = seq >> 16;
        for (int k = 0; k < 6; k++, v /= 36)
            tmp[len - 6 + k] = letters[v % 36];
        if (link_at(fd, tmp) == 0) {
            if (rename(tmp, path) == 0) return 0;
            int e = errno;
            unlink(tmp);
            errno = e;
            return -1;
        }
        if (errno != EEXIST) return -1;
    }
    errno = EEXIST;
    return -1;
}
