/* h5out.c - golden files and recordings written safely: the target is
 * either untouched or complete, and nothing else is left behind.
 *
 * HDF5 builds the file in memory (its core driver) and commit writes it
 * whole. Where the file system has anonymous files (O_TMPFILE), it goes
 * into one in the target's folder, is synced and only then linked in (at
 * the target when the name is free, else at a temporary name renamed over
 * it, with the cleanup signals held): a writer killed by any signal,
 * SIGKILL included, leaves nothing. HDF5 cannot write an anonymous file
 * itself: it resolves a file's name, and /proc's name of one resolves to
 * nothing.
 *
 * Elsewhere the file goes to a temporary name beside the target,
 * `.NAME.ppv-tmp.WRITER.PID.XXXXXX`, synced and renamed: SIGINT, SIGTERM
 * and SIGHUP remove it, and a later write into the folder removes those
 * whose writer (same host and PID namespace, WRITER; process PID) is gone,
 * as after a crash. No object, the root group included, records a
 * modification time, so with SOURCE_DATE_EPOCH set (the `created`
 * attribute) the same content gives the same bytes. */
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

/* Syncs a folder by path; 0 or -1. */
static int sync_dir(const char *path) {
    int fd = open(path, O_RDONLY | O_DIRECTORY);
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
    case EACCES:
    case ENOMEM: return strerror(e);
    default: return "disk full or not writable?";
    }
}

/* The core driver's buffer, followed through HDF5's file-image callbacks:
 * at close HDF5 hands it to image_free, which keeps it (the finished
 * file, superblock and all, then zeros to the increment) for commit. */
typedef struct h5_image {
    unsigned char *mem;
    size_t size;
    unsigned char *kept; /* the closed file's bytes, once HDF5 has let go */
    size_t kept_size;
} h5_image;

static void *image_realloc(void *ptr, size_t size, H5FD_file_image_op_t op, void *udata) {
    (void)op;
    h5_image *im = udata;
    void *p = realloc(ptr, size ? size : 1);
    if (p) im->mem = p, im->size = size;
    return p;
}

static void *image_malloc(size_t size, H5FD_file_image_op_t op, void *udata) {
    return image_realloc(NULL, size, op, udata);
}

static void *image_memcpy(void *dest, const void *src, size_t size, H5FD_file_image_op_t op,
                          void *udata) {
    (void)op, (void)udata;
    return memcpy(dest, src, size);
}

static herr_t image_free(void *ptr, H5FD_file_image_op_t op, void *udata) {
    h5_image *im = udata;
    if (op == H5FD_FILE_IMAGE_OP_FILE_CLOSE && ptr == im->mem && !im->kept) {
        im->kept = ptr, im->kept_size = im->size; /* commit writes and frees it */
    } else {
        free(ptr);
    }
    if (ptr == im->mem) im->mem = NULL, im->size = 0;
    return 0;
}

/* The callbacks share one h5_image, which outlives the file: no copies. */
static void *udata_copy(void *udata) {
    return udata;
}

static herr_t udata_free(void *udata) {
    (void)udata;
    return 0;
}

/* The file format and property lists every output has. The file is built
 * in memory (HDF5's core driver, no backing store) and written whole at
 * commit: it reaches the file system complete, never half. */
static int create_file(h5_out *o) {
    /* the 1.10 file format: checksummed object headers and chunk indexes, so a
     * flipped metadata byte is caught like a flipped data byte */
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), fcpl = H5Pcreate(H5P_FILE_CREATE);
    o->gcpl = H5Pcreate(H5P_GROUP_CREATE);
    if (!(o->image = calloc(1, sizeof *o->image))) {
        errno = ENOMEM;
    } else if (fapl >= 0) {
        H5FD_file_image_callbacks_t cb = {image_malloc, image_memcpy, image_realloc, image_free,
                                          udata_copy,   udata_free,   o->image};
        /* a strong close: HDF5 lets go of the image at H5Fclose, never later */
        if (H5Pset_fapl_core(fapl, (size_t)1 << 20, 0) >= 0 &&
            H5Pset_file_image_callbacks(fapl, &cb) >= 0 &&
            H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG) >= 0 &&
            H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110) >= 0 && fcpl >= 0 &&
            o->gcpl >= 0 && H5Pset_obj_track_times(fcpl, 0) >= 0 &&
            H5Pset_obj_track_times(o->gcpl, 0) >= 0) {
            /* a name of its own: HDF5 tells open files apart by it */
            char name[64];
            snprintf(name, sizeof name, "ppv-output-%p", (void *)o->image);
            o->file = H5Fcreate(name, H5F_ACC_TRUNC, fcpl, fapl);
        }
    }
    if (fapl >= 0) H5Pclose(fapl);
    if (fcpl >= 0) H5Pclose(fcpl);
    return o->file < 0 ? -1 : 0;
}

/* Opens where the file will go: an anonymous file in o->dir where the file
 * system has them, else a temporary name beside the target (o->tmp),
 * guarded against the cleanup signals. 0, or -1 with errno. */
static int open_destination(h5_out *o) {
    o->fd = ppv_output_anon_open(o->path);
    if (o->fd >= 0) return o->anon = 1, 0; /* o->tmp: where to link if the name is taken */
    sigset_t before;
    block_cleanup_signals(&before); /* a signal now waits until the handler is in */
    o->fd = mkstemp(o->tmp);
    int e = errno;
    if (o->fd >= 0) o->guarded = guard_tmp(&o->guard, o->tmp);
    sigprocmask(SIG_SETMASK, &before, NULL);
    if (o->fd < 0) {
        o->tmp[0] = '\0';
        errno = e;
        return -1;
    }
    mode_t mask = umask(0); /* mkstemp makes 0600; a golden file is as readable as any */
    umask(mask);
    fchmod(o->fd, 0666 & ~mask);
    return 0;
}

int h5_out_create(h5_out *o, const char *path, const char *what, char *err, size_t errlen) {
    memset(o, 0, sizeof *o);
    o->file = o->gcpl = o->fd = -1;
    ppv_output_kind kind;
    if (ppv_output_target(path, o->path, sizeof o->path, &kind, err, errlen) < 0) return -1;
    o->stream = kind == PPV_OUTPUT_STREAM; /* written straight through at commit */
    path = o->path;                        /* a link's target */
    if (!o->stream) {
        char dcopy[4096], bcopy[4096], id[9];
        snprintf(dcopy, sizeof dcopy, "%s", path);
        snprintf(bcopy, sizeof bcopy, "%s", path);
        snprintf(o->dir, sizeof o->dir, "%s", dirname(dcopy));
        writer_id(id);
        remove_stale_tmps(o->dir, id);
        snprintf(o->tmp, sizeof o->tmp, "%s/.%s%s%s.%ld.XXXXXX", o->dir, basename(bcopy),
                 TMP_MARK, id, (long)getpid());
        if (open_destination(o) < 0)
            return gerr(err, errlen, "%s: cannot create a file beside it: %s", path,
                        strerror(errno));
    }
    if (create_file(o) < 0) {
        int e = errno;
        h5_out_abort(o);
        return gerr(err, errlen, "%s: cannot write %s: %s", path, what, h5_write_failure(e));
    }
    return 0;
}

hid_t h5_out_group(const h5_out *o, hid_t parent, const char *name) {
    return H5Gcreate2(parent, name, H5P_DEFAULT, o->gcpl, H5P_DEFAULT);
}

/* Writes n bytes to fd; 0, or -1 with errno. */
static int write_all(int fd, const unsigned char *p, size_t n) {
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            if (k == 0) errno = EIO;
            return -1;
        }
        p += k, n -= (size_t)k;
    }
    return 0;
}

/* A superblock's end-of-file address (versions 2 and 3: eight bytes at
 * offset 28 with eight-byte offsets), or 0 if the bytes are not one. */
static uint64_t superblock_eof(const unsigned char *p, size_t n) {
    static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    if (n < 48 || memcmp(p, sig, 8) != 0 || (p[8] != 2 && p[8] != 3) || p[9] != 8) return 0;
    uint64_t v = 0;
    for (int k = 7; k >= 0; k--)
        v = v << 8 | p[28 + k];
    return v;
}

/* Closes the file and takes its bytes, as HDF5 left them at close: a
 * malloc block whose first *n bytes are the file, or NULL with errno (and *why, when HDF5's
 * image is not the file its superblock describes). */
static unsigned char *take_image(h5_out *o, size_t *n, const char **why) {
    errno = 0;
    *why = NULL;
    int bad = H5Fclose(o->file) < 0;
    int e = errno;
    o->file = -1;
    h5_image *im = o->image;
    unsigned char *buf = im ? im->kept : NULL;
    *n = im ? im->kept_size : 0;
    if (im) im->kept = NULL;
    /* the core driver's buffer is a whole number of increments; the file
     * ends where its superblock says, as a file HDF5 wrote itself would */
    uint64_t end = buf ? superblock_eof(buf, *n) : 0;
    if (!bad && buf && (end == 0 || end > *n)) {
        *why = "HDF5's image of the file does not hold the file its superblock describes";
        bad = 1;
    }
    *n = (size_t)end;
    if (bad || !buf) {
        free(buf);
        errno = e ? e : ENOMEM;
        return NULL;
    }
    return buf;
}

/* Puts the complete file in place: an anonymous file linked in, a
 * temporary renamed (both synced first). 0, or -1 with errno. */
static int place(h5_out *o) {
    sigset_t before;
    int rc = fsync(o->fd);
    block_cleanup_signals(&before); /* a second name lives only inside this */
    if (rc == 0)
        rc = o->anon ? ppv_output_anon_place(o->fd, o->path, o->tmp, sizeof o->tmp)
                     : rename(o->tmp, o->path);
    int e = errno;
    if (rc == 0 || o->anon) o->tmp[0] = '\0'; /* nothing left at that name */
    sigprocmask(SIG_SETMASK, &before, NULL);
    errno = e;
    return rc;
}

int h5_out_commit(h5_out *o, const char *what, char *err, size_t errlen) {
    size_t n;
    const char *why;
    unsigned char *img = take_image(o, &n, &why);
    if (!img) {
        int e = errno;
        h5_out_abort(o);
        return gerr(err, errlen, "%s: cannot write %s: %s", o->path, what,
                    why ? why : h5_write_failure(e));
    }
    int rc = 0, e = 0;
    if (o->stream) { /* standard output, a FIFO or a device: straight through */
        int out = strcmp(o->path, "-") == 0;
        FILE *f = out ? stdout : fopen(o->path, "w");
        errno = 0;
        if (!f || fwrite(img, 1, n, f) != n || fflush(f) != 0) rc = -1, e = errno;
        if (f && !out && fclose(f) != 0 && rc == 0) rc = -1, e = errno;
        free(img);
        h5_out_abort(o);
        return rc < 0 ? gerr(err, errlen, "%s: cannot write %s: %s", o->path, what,
                             strerror(e ? e : EIO))
                      : 0;
    }
    if (write_all(o->fd, img, n) < 0) {
        e = errno;
        free(img);
        h5_out_abort(o);
        return gerr(err, errlen, "%s: cannot write %s: %s", o->path, what, strerror(e));
    }
    free(img);
    if (place(o) < 0) {
        e = errno;
        h5_out_abort(o);
        return gerr(err, errlen, "%s: cannot put the file in place: %s", o->path, strerror(e));
    }
    h5_out_abort(o); /* closes what is left: the descriptor, the guard, the group list */
    sync_dir(o->dir); /* best effort: the name itself is durable on most systems */
    return 0;
}

void h5_out_abort(h5_out *o) {
    if (o->file >= 0) H5Fclose(o->file);
    if (o->image) free(o->image->kept); /* a file closed here lets go of its image */
    free(o->image);
    o->image = NULL;
    if (o->gcpl >= 0) H5Pclose(o->gcpl);
    o->file = o->gcpl = -1;
    sigset_t before;
    block_cleanup_signals(&before);
    if (o->fd >= 0) close(o->fd); /* an anonymous file goes with its last descriptor */
    if (o->tmp[0] && !o->anon) unlink(o->tmp);
    o->fd = -1;
    o->tmp[0] = '\0';
    if (o->guarded) unguard_tmp(&o->guard);
    o->guarded = 0;
    sigprocmask(SIG_SETMASK, &before, NULL);
}
