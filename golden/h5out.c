/* h5out.c - golden files and recordings written safely: an HDF5 file at a
 * temporary name beside the target, flushed, synced and renamed, so the
 * target is either untouched or complete.
 *
 * The temporary is `.NAME.ppv-tmp.WRITER.PID.XXXXXX`: SIGINT, SIGTERM and
 * SIGHUP during the write remove it, and a later write into the folder
 * removes those whose writer (same host and PID namespace, WRITER; process
 * PID) is gone, as after a crash. No object, the root group included,
 * records a modification time, so with SOURCE_DATE_EPOCH set (the
 * `created` attribute) the same content gives the same bytes. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "golden_internal.h"

static const int cleanup_signals[] = {SIGINT, SIGTERM, SIGHUP};

_Static_assert(sizeof cleanup_signals / sizeof cleanup_signals[0] == H5_CLEANUP_SIGNALS,
               "h5_tmp_guard holds one entry per cleanup signal");
enum { NSIGNALS = H5_CLEANUP_SIGNALS };

/* The temporary file being written, for the signal handler, which may only
 * read memory that stays put: set with the signals blocked before the
 * handler goes in, cleared before it comes out. Process-wide state, so one
 * file at a time per process is guarded. */
static char g_tmp_path[8300];
static volatile sig_atomic_t g_tmp_live;

/* SIGINT/SIGTERM/SIGHUP while the temporary file exists: remove it, then
 * die of the same signal (unlink, signal and raise are async-signal-safe). */
static void remove_tmp_and_die(int sig) {
    if (g_tmp_live) unlink(g_tmp_path);
    signal(sig, SIG_DFL);
    raise(sig); /* delivered, with the default action, when this returns */
}

/* Blocks the cleanup signals, keeping the mask before in *old. */
static void block_cleanup_signals(sigset_t *old) {
    sigset_t set;
    sigemptyset(&set);
    for (int k = 0; k < NSIGNALS; k++)
        sigaddset(&set, cleanup_signals[k]);
    sigprocmask(SIG_BLOCK, &set, old);
}

/* Puts path in g_tmp_path and the handler on each cleanup signal whose
 * action is the default (an ignored signal stays ignored, a caller's own
 * handler stays). Call with the signals blocked. Returns 1, or 0 when
 * another record in this process holds the handler (nothing done). */
static int guard_tmp(h5_tmp_guard *g, const char *path) {
    if (g_tmp_live) return 0;
    snprintf(g_tmp_path, sizeof g_tmp_path, "%s", path);
    g_tmp_live = 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = remove_tmp_and_die;
    sigemptyset(&sa.sa_mask);
    for (int k = 0; k < NSIGNALS; k++)
        sigaddset(&sa.sa_mask, cleanup_signals[k]);
    for (int k = 0; k < NSIGNALS; k++)
        g->installed[k] = sigaction(cleanup_signals[k], NULL, &g->old[k]) == 0 &&
                          g->old[k].sa_handler == SIG_DFL &&
                          sigaction(cleanup_signals[k], &sa, NULL) == 0;
    return 1;
}

/* Gives each signal its action back and forgets the path. Call with the
 * signals blocked: one arriving meanwhile waits and then acts as before. */
static void unguard_tmp(h5_tmp_guard *g) {
    for (int k = 0; k < NSIGNALS; k++)
        if (g->installed[k]) sigaction(cleanup_signals[k], &g->old[k], NULL);
    g_tmp_live = 0;
    g_tmp_path[0] = '\0';
}

/* This process's host and PID namespace as 8 hex digits: a PID in a
 * temporary's name means this process's PID only where both are the same. */
static void writer_id(char out[9]) {
    char host[256] = "", ns[64] = "";
    gethostname(host, sizeof host - 1);
    ssize_t n = readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
    ns[n > 0 ? n : 0] = '\0';
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const char *p = host; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    h = (h ^ '/') * 16777619u;
    for (const char *p = ns; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    snprintf(out, 9, "%08x", (unsigned)h);
}

static const char TMP_MARK[] = ".ppv-tmp.";

/* The writer's PID if name is a record temporary (`.NAME.ppv-tmp.ID.PID.XXXXXX`,
 * ID this writer's), else 0. */
static long tmp_writer_pid(const char *name, const char *id) {
    size_t len = strlen(name);
    if (name[0] != '.' || len < 1 + 1 + sizeof TMP_MARK - 1 + 8 + 2 + 1 + 6) return 0;
    const char *x = name + len - 6; /* mkstemp's six letters and digits */
    for (int k = 0; k < 6; k++)
        if (!isalnum((unsigned char)x[k])) return 0;
    if (x[-1] != '.') return 0;
    const char *p = x - 1; /* back over the PID's digits */
    while (p > name && isdigit((unsigned char)p[-1]))
        p--;
    if (p == x - 1 || *p == '0' || x - 1 - p > 9 || p - name < (long)(sizeof TMP_MARK - 1) + 9)
        return 0;
    const char *idp = p - 9; /* "ID." */
    if (memcmp(idp, id, 8) != 0 || idp[8] != '.') return 0;
    if (memcmp(idp - (sizeof TMP_MARK - 1), TMP_MARK, sizeof TMP_MARK - 1) != 0) return 0;
    if (idp - (sizeof TMP_MARK - 1) <= name + 1) return 0; /* NAME is not empty */
    return strtol(p, NULL, 10);
}

/* Removes the record temporaries in dir whose writer is gone (a crash, a
 * SIGKILL): same host and PID namespace, and no process has its PID. A live
 * writer's file, or anything else, is left alone. Best effort. */
static void remove_stale_tmps(const char *dir, const char *id) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        long pid = tmp_writer_pid(e->d_name, id);
        struct stat st;
        if (pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
            unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
}

void h5_created_now(char *buf, size_t len) {
    const char *sde = getenv("SOURCE_DATE_EPOCH");
    time_t t = sde && *sde ? (time_t)strtoll(sde, NULL, 10) : time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* Syncs a file or folder by path; 0 or -1. */
static int sync_path(const char *path, int dir) {
    int fd = open(path, dir ? O_RDONLY | O_DIRECTORY : O_RDONLY);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

const char *h5_write_failure(int e) {
    switch (e) {
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
    case EROFS:
    case EIO:
    case EACCES: return strerror(e);
    default: return "disk full or not writable?";
    }
}

/* The file format and property lists every output has. */
static int create_file(h5_out *o, const char *name) {
    /* the 1.10 file format: checksummed object headers and chunk indexes, so a
     * flipped metadata byte is caught like a flipped data byte */
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), fcpl = H5Pcreate(H5P_FILE_CREATE);
    o->gcpl = H5Pcreate(H5P_GROUP_CREATE);
    if (fapl >= 0) H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110);
    if (fapl >= 0 && fcpl >= 0 && o->gcpl >= 0 && H5Pset_obj_track_times(fcpl, 0) >= 0 &&
        H5Pset_obj_track_times(o->gcpl, 0) >= 0)
        o->file = H5Fcreate(name, H5F_ACC_TRUNC, fcpl, fapl);
    if (fapl >= 0) H5Pclose(fapl);
    if (fcpl >= 0) H5Pclose(fcpl);
    return o->file < 0 ? -1 : 0;
}

int h5_out_create(h5_out *o, const char *path, const char *what, char *err, size_t errlen) {
    memset(o, 0, sizeof *o);
    o->file = o->gcpl = -1;
    ppv_output_kind kind;
    if (ppv_output_target(path, o->path, sizeof o->path, &kind, err, errlen) < 0) return -1;
    /* a stream is built in a temporary file of TMPDIR (HDF5 needs a file it
     * can seek in) and copied out whole at commit */
    o->stream = kind == PPV_OUTPUT_STREAM;
    path = o->path; /* a link's target */
    char dcopy[4096], bcopy[4096], id[9];
    const char *tmpdir = getenv("TMPDIR");
    snprintf(dcopy, sizeof dcopy, "%s", path);
    snprintf(bcopy, sizeof bcopy, "%s", o->stream ? "stream" : path);
    snprintf(o->dir, sizeof o->dir, "%s",
             !o->stream ? dirname(dcopy) : tmpdir && *tmpdir ? tmpdir : "/tmp");
    writer_id(id);
    remove_stale_tmps(o->dir, id);
    snprintf(o->tmp, sizeof o->tmp, "%s/.%s%s%s.%ld.XXXXXX", o->dir, basename(bcopy), TMP_MARK, id,
             (long)getpid());
    sigset_t before;
    block_cleanup_signals(&before); /* a signal now waits until the handler is in */
    int fd = mkstemp(o->tmp);
    int e = errno;
    if (fd >= 0) o->guarded = guard_tmp(&o->guard, o->tmp);
    sigprocmask(SIG_SETMASK, &before, NULL);
    if (fd < 0) {
        o->tmp[0] = '\0';
        return gerr(err, errlen, "%s: cannot create a temporary file beside it: %s", path,
                    strerror(e));
    }
    mode_t mask = umask(0); /* mkstemp makes 0600; a golden file is as readable as any */
    umask(mask);
    fchmod(fd, 0666 & ~mask);
    close(fd);
    if (create_file(o, o->tmp) < 0) {
        e = errno;
        h5_out_abort(o);
        return gerr(err, errlen, "%s: cannot write %s: %s", path, what, h5_write_failure(e));
    }
    return 0;
}

hid_t h5_out_group(const h5_out *o, hid_t parent, const char *name) {
    return H5Gcreate2(parent, name, H5P_DEFAULT, o->gcpl, H5P_DEFAULT);
}

/* A stream's commit: the finished temporary copied out whole, then
 * removed. 0, or -1 with the reason. */
static int copy_out(h5_out *o, const char *what, char *err, size_t errlen) {
    int out = strcmp(o->path, "-") == 0;
    FILE *in = fopen(o->tmp, "rb"), *f = out ? stdout : fopen(o->path, "w");
    char buf[65536];
    size_t n;
    errno = 0;
    int bad = !in || !f, e = errno;
    while (!bad && (n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, f) != n) bad = 1, e = errno;
    if (!bad && (ferror(in) || fflush(f) != 0)) bad = 1, e = errno;
    if (in) fclose(in);
    if (f && !out && fclose(f) != 0 && !bad) bad = 1, e = errno;
    h5_out_abort(o); /* the temporary goes either way */
    return bad ? gerr(err, errlen, "%s: cannot write %s: %s", o->path, what, strerror(e ? e : EIO))
               : 0;
}

int h5_out_commit(h5_out *o, const char *what, char *err, size_t errlen) {
    errno = 0;
    int bad = H5Fflush(o->file, H5F_SCOPE_GLOBAL) < 0;
    int e = errno;
    bad |= H5Fclose(o->file) < 0;
    if (!e) e = errno;
    o->file = -1;
    if (bad) {
        h5_out_abort(o);
        return gerr(err, errlen, "%s: cannot write %s: %s", o->path, what, h5_write_failure(e));
    }
    if (o->stream) {
        if (o->gcpl >= 0) H5Pclose(o->gcpl);
        o->gcpl = -1;
        return copy_out(o, what, err, errlen);
    }
    sigset_t before;
    int rc = sync_path(o->tmp, 0);
    block_cleanup_signals(&before); /* renamed and unguarded as one step */
    if (rc == 0) rc = rename(o->tmp, o->path);
    if (rc < 0) {
        int e = errno;
        sigprocmask(SIG_SETMASK, &before, NULL);
        h5_out_abort(o);
        return gerr(err, errlen, "%s: cannot put the file in place: %s", o->path, strerror(e));
    }
    o->tmp[0] = '\0';
    if (o->guarded) unguard_tmp(&o->guard);
    o->guarded = 0;
    sigprocmask(SIG_SETMASK, &before, NULL);
    sync_path(o->dir, 1); /* best effort: the rename itself is durable on most systems */
    if (o->gcpl >= 0) H5Pclose(o->gcpl);
    o->gcpl = -1;
    return 0;
}

void h5_out_abort(h5_out *o) {
    if (o->file >= 0) H5Fclose(o->file);
    if (o->gcpl >= 0) H5Pclose(o->gcpl);
    o->file = o->gcpl = -1;
    sigset_t before;
    block_cleanup_signals(&before);
    if (o->tmp[0]) unlink(o->tmp);
    o->tmp[0] = '\0';
    if (o->guarded) unguard_tmp(&o->guard);
    o->guarded = 0;
    sigprocmask(SIG_SETMASK, &before, NULL);
}
