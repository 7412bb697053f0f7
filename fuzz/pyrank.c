/* pyrank.c - the Python ranks module (libppv_pyrank.so): `ppv fuzz py`
 * runs a Python function on every rank of a mock world (pyrank.h).
 *
 * Ranks as processes (a shared bridge): ppv forks one process, the
 * zygote, before it has any thread or interpreter. The zygote starts an
 * interpreter, imports the file (and torch, and whatever it imports) once
 * and then, for every run, forks one process a rank, which runs
 * ppv.dist._run_rank on its main thread and leaves with _exit: module
 * globals are each rank's own and start afresh every run, as under a
 * launcher. The zygote watches its ranks (a signalfd for SIGCHLD): a rank
 * whose process dies before its function returns ends on the bridge with
 * how it died. ppv and the zygote talk over a socket, every answer
 * awaited with a bound; each process dies with its parent.
 *
 * Ranks as threads: one embedded interpreter here; for every run, one
 * Python thread a rank (threading.Thread running ppv.dist._run_rank).
 *
 * Either way each rank is bound to the run's bridge through ppv._bridge,
 * a module made here. A bridge call releases the interpreter's lock while
 * it waits, so the one rank the world lets run takes it: the ranks'
 * Python runs one at a time, in the order the scheduler decides. Every
 * call names its run (a generation number): a thread left over from an
 * earlier run gets STALE and touches nothing.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pyrank.h"

enum { STALE = -199 };

struct ppv_pyrank {
    int32_t nranks;
    PyObject *function; /* FUNCTION */
    PyObject *runner;   /* ppv.dist._run_rank */
    PyObject *thread_cls; /* threading.Thread */
    PyObject *threads;  /* this run's, a list */
    /* ranks as processes */
    ppv_ext *shared;
    pid_t zygote; /* ppv's side: the zygote, and its end of the socket */
    int sock;
    pid_t *pids;  /* the zygote's side: this run's rank processes, 0 once reaped */
    pid_t *next;  /* the next run's, forked ahead, waiting for their go */
    int go;       /* the next run's go: a pipe, each of its ranks reads the run's number */
    int sigfd;    /* SIGCHLD */
    long gen;     /* ppv's side: the last run's number */
};

static struct {
    const ppv_pyrank_api *api;
    ppv_ext *x;      /* the running run's bridge */
    long gen;        /* its number */
    int32_t nranks;
    int open;      /* ppv's side: targets open (ranks as processes: several may be, one a
                      job, each its own zygote; as threads: one, alone) */
    int threads;   /* the open one is ranks as threads */
    int processes; /* a rank process's (or the zygote's) */
    int ended;     /* a rank process's: its rank has ended on the bridge (touch it no more) */
    size_t message_bytes; /* ranks as processes: the most a call carries */
} g;

/* The message into err (snprintf's). */
static void errf(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void errf(char *err, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
}

/* Python's error as text (type: message), cleared. */
static void exception_text(char *buf, size_t n) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyObject *s = value ? PyObject_Str(value) : NULL;
    const char *msg = s ? PyUnicode_AsUTF8(s) : NULL;
    const char *tn = type ? ((PyTypeObject *)type)->tp_name : "error";
    char place[300] = "";
    for (PyObject *t = tb; t && t != Py_None;) { /* the innermost frame */
        PyObject *next = PyObject_GetAttrString(t, "tb_next");
        PyObject *line = PyObject_GetAttrString(t, "tb_lineno");
        PyObject *frame = PyObject_GetAttrString(t, "tb_frame");
        PyObject *code = frame ? PyObject_GetAttrString(frame, "f_code") : NULL;
        PyObject *file = code ? PyObject_GetAttrString(code, "co_filename") : NULL;
        const char *fs = file ? PyUnicode_AsUTF8(file) : NULL;
        if (fs && line) snprintf(place, sizeof place, " (%s:%ld)", fs, PyLong_AsLong(line));
        Py_XDECREF(line), Py_XDECREF(frame), Py_XDECREF(code), Py_XDECREF(file);
        Py_XDECREF(next); /* t is borrowed along the chain: tb holds it */
        t = next && next != Py_None ? next : NULL;
    }
    PyErr_Clear();
    snprintf(buf, n, "%s: %s%s", tn, msg ? msg : "?", place);
    Py_XDECREF(s);
    Py_XDECREF(type), Py_XDECREF(value), Py_XDECREF(tb);
}

/* ---- ppv._bridge ------------------------------------------------------------ */

static void flush_output(void);

/* The run's bridge for generation gen, or NULL (a stale thread). */
static ppv_ext *bridge(long gen) {
    return gen == g.gen ? g.x : NULL;
}

static PyObject *rc_of(int rc) {
    return PyLong_FromLong(rc);
}

/* A buffer of obj: writable for what is received into. */
static int get_buffer(PyObject *obj, Py_buffer *v, int writable) {
    return PyObject_GetBuffer(obj, v, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0));
}

static PyObject *b_begin(PyObject *self, PyObject *args) {
    (void)self;
    long gen;
    int rank;
    if (!PyArg_ParseTuple(args, "li", &gen, &rank)) return NULL;
    ppv_ext *x = bridge(gen);
    if (!x) return rc_of(STALE);
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = g.api->begin(x, rank);
    Py_END_ALLOW_THREADS return rc_of(rc);
}

static PyObject *b_end(PyObject *self, PyObject *args) {
    (void)self;
    long gen;
    int rank;
    const char *error;
    if (!PyArg_ParseTuple(args, "liz", &gen, &rank, &error)) return NULL;
    ppv_ext *x = bridge(gen);
    if (x && g.processes) flush_output(); /* a rank's output, in the order of the run */
    if (g.processes) g.ended = 1; /* from here the bridge may be another run's */
    if (x) {
        Py_BEGIN_ALLOW_THREADS g.api->end(x, rank, error);
        Py_END_ALLOW_THREADS
    }
    Py_RETURN_NONE;
}

/* send, recv: (gen, rank, buffer, peer, comm, what) */
static PyObject *p2p(PyObject *args, int send) {
    long gen;
    int rank, peer, comm;
    PyObject *obj;
    const char *what;
    if (!PyArg_ParseTuple(args, "liOiis", &gen, &rank, &obj, &peer, &comm, &what)) return NULL;
    ppv_ext *x = bridge(gen);
    if (!x) return rc_of(STALE);
    Py_buffer v;
    if (get_buffer(obj, &v, !send) < 0) return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = send ? g.api->send(x, rank, v.buf, (size_t)v.len, peer, comm, what)
                                     : g.api->recv(x, rank, v.buf, (size_t)v.len, peer, comm, what);
    Py_END_ALLOW_THREADS PyBuffer_Release(&v);
    return rc_of(rc);
}

static PyObject *b_send(PyObject *self, PyObject *args) {
    (void)self;
    return p2p(args, 1);
}

static PyObject *b_recv(PyObject *self, PyObject *args) {
    (void)self;
    return p2p(args, 0);
}

static PyObject *b_broadcast(PyObject *self, PyObject *args) {
    (void)self;
    long gen;
    int rank, root, comm;
    PyObject *obj;
    const char *what;
    if (!PyArg_ParseTuple(args, "liOiis", &gen, &rank, &obj, &root, &comm, &what)) return NULL;
    ppv_ext *x = bridge(gen);
    if (!x) return rc_of(STALE);
    Py_buffer v;
    if (get_buffer(obj, &v, 1) < 0) return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = g.api->broadcast(x, rank, v.buf, (size_t)v.len, root, comm, what);
    Py_END_ALLOW_THREADS PyBuffer_Release(&v);
    return rc_of(rc);
}

static PyObject *b_all_reduce_f32(PyObject *self, PyObject *args) {
    (void)self;
    long gen;
    int rank, comm;
    PyObject *obj;
    const char *what;
    if (!PyArg_ParseTuple(args, "liOis", &gen, &rank, &obj, &comm, &what)) return NULL;
    ppv_ext *x = bridge(gen);
    if (!x) return rc_of(STALE);
    Py_buffer v;
    if (get_buffer(obj, &v, 1) < 0) return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = g.api->allreduce_f32(x, rank, v.buf, (size_t)v.len / sizeof(float),
                                                     comm, what);
    Py_END_ALLOW_THREADS PyBuffer_Release(&v);
    return rc_of(rc);
}

static PyObject *b_all_gather(PyObject *self, PyObject *args) {
    (void)self;
    long gen;
    int rank, comm;
    PyObject *sobj, *robj;
    const char *what;
    if (!PyArg_ParseTuple(args, "liOOis", &gen, &rank, &sobj, &robj, &comm, &what)) return NULL;
    ppv_ext *x = bridge(gen);
    if (!x) return rc_of(STALE);
    Py_buffer s, r;
    if (get_buffer(sobj, &s, 0) < 0) return NULL;
    if (get_buffer(robj, &r, 1) < 0) {
        PyBuffer_Release(&s);
        return NULL;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = g.api->allgather(x, rank, s.buf, r.buf, (size_t)s.len, comm, what);
    Py_END_ALLOW_THREADS PyBuffer_Release(&s);
    PyBuffer_Release(&r);
    return rc_of(rc);
}

static PyObject *b_probe(PyObject *self, PyObject *args) {
    (void)self;
    long gen;
    int rank, peer, comm;
    const char *what;
    if (!PyArg_ParseTuple(args, "liiis", &gen, &rank, &peer, &comm, &what)) return NULL;
    ppv_ext *x = bridge(gen);
    if (!x) return Py_BuildValue("(ii)", STALE, 0);
    int rc, arrived = 0;
    Py_BEGIN_ALLOW_THREADS rc = g.api->probe(x, rank, peer, comm, &arrived, what);
    Py_END_ALLOW_THREADS return Py_BuildValue("(ii)", rc, arrived);
}

/* yield_, group_start, group_end: (gen, rank, what) */
static PyObject *simple(PyObject *args, int (*fn)(ppv_ext *, int32_t, const char *)) {
    long gen;
    int rank;
    const char *what;
    if (!PyArg_ParseTuple(args, "lis", &gen, &rank, &what)) return NULL;
    ppv_ext *x = bridge(gen);
    if (!x) return rc_of(STALE);
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = fn(x, rank, what);
    Py_END_ALLOW_THREADS return rc_of(rc);
}

static PyObject *b_yield(PyObject *self, PyObject *args) {
    (void)self;
    return simple(args, g.api->yield);
}

static PyObject *b_group_start(PyObject *self, PyObject *args) {
    (void)self;
    return simple(args, g.api->group_start);
}

static PyObject *b_group_end(PyObject *self, PyObject *args) {
    (void)self;
    return simple(args, g.api->group_end);
}

static PyObject *b_wait_any(PyObject *self, PyObject *args) {
    (void)self;
    long gen;
    int rank, comm;
    const char *what;
    if (!PyArg_ParseTuple(args, "liis", &gen, &rank, &comm, &what)) return NULL;
    ppv_ext *x = bridge(gen);
    if (!x) return rc_of(STALE);
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = g.api->wait_any(x, rank, comm, what);
    Py_END_ALLOW_THREADS return rc_of(rc);
}

/* isend, irecv: (gen, rank, buffer, peer, comm, what) -> (rc, id). The
 * buffer is the caller's to keep alive until the op completes or the rank
 * ends (ppv.dist keeps it in the Work); an isend's data is copied. */
static PyObject *post_async(PyObject *args, int send) {
    long gen;
    int rank, peer, comm;
    PyObject *obj;
    const char *what;
    if (!PyArg_ParseTuple(args, "liOiis", &gen, &rank, &obj, &peer, &comm, &what)) return NULL;
    ppv_ext *x = bridge(gen);
    if (!x) return Py_BuildValue("(iL)", STALE, 0LL);
    Py_buffer v;
    if (get_buffer(obj, &v, !send) < 0) return NULL;
    int rc;
    int64_t id = 0;
    Py_BEGIN_ALLOW_THREADS rc = send ? g.api->isend(x, rank, v.buf, (size_t)v.len, peer, comm,
                                                    what, &id)
                                     : g.api->irecv(x, rank, v.buf, (size_t)v.len, peer, comm,
                                                    what, &id);
    Py_END_ALLOW_THREADS PyBuffer_Release(&v);
    return Py_BuildValue("(iL)", rc, (long long)id);
}

static PyObject *b_isend(PyObject *self, PyObject *args) {
    (void)self;
    return post_async(args, 1);
}

static PyObject *b_irecv(PyObject *self, PyObject *args) {
    (void)self;
    return post_async(args, 0);
}

/* wait_op: (gen, rank, id, what) -> rc; test_op: -> (rc, done) */
static PyObject *b_wait_op(PyObject *self, PyObject *args) {
    (void)self;
    long gen;
    int rank;
    long long id;
    const char *what;
    if (!PyArg_ParseTuple(args, "liLs", &gen, &rank, &id, &what)) return NULL;
    ppv_ext *x = bridge(gen);
    if (!x) return rc_of(STALE);
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = g.api->wait_op(x, rank, (int64_t)id, what);
    Py_END_ALLOW_THREADS return rc_of(rc);
}

static PyObject *b_test_op(PyObject *self, PyObject *args) {
    (void)self;
    long gen;
    int rank;
    long long id;
    const char *what;
    if (!PyArg_ParseTuple(args, "liLs", &gen, &rank, &id, &what)) return NULL;
    ppv_ext *x = bridge(gen);
    if (!x) return Py_BuildValue("(ii)", STALE, 0);
    int rc, done = 0;
    Py_BEGIN_ALLOW_THREADS rc = g.api->test_op(x, rank, (int64_t)id, &done, what);
    Py_END_ALLOW_THREADS return Py_BuildValue("(ii)", rc, done);
}

/* wait_some: (gen, rank, op ids as int64 bytes, communicators as int32
 * bytes, block, deadline, what) -> (rc, which): the first posted op done
 * (its index), len(ids) + j for a message from any rank of the j-th
 * communicator, -1 when nothing is (block 0) or the wait timed out
 * (deadline >= 0) */
static PyObject *b_wait_some(PyObject *self, PyObject *args) {
    (void)self;
    long gen;
    int rank, block;
    double deadline;
    Py_buffer v, c;
    const char *what;
    if (!PyArg_ParseTuple(args, "liy*y*ids", &gen, &rank, &v, &c, &block, &deadline, &what))
        return NULL;
    ppv_ext *x = bridge(gen);
    int rc = STALE;
    int32_t which = -1;
    if (x) {
        Py_BEGIN_ALLOW_THREADS rc = g.api->wait_some(x, rank, v.buf,
                                                     (int32_t)((size_t)v.len / sizeof(int64_t)),
                                                     c.buf,
                                                     (int32_t)((size_t)c.len / sizeof(int32_t)),
                                                     block, deadline, &which, what);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&v);
    PyBuffer_Release(&c);
    return Py_BuildValue("(ii)", rc, (int)which);
}

/* new_group: (gen, rank, ranks as int32 bytes, tag, what) -> (rc, comm) */
static PyObject *b_new_group(PyObject *self, PyObject *args) {
    (void)self;
    long gen;
    int rank;
    Py_buffer v;
    long long tag;
    const char *what;
    if (!PyArg_ParseTuple(args, "liy*Ls", &gen, &rank, &v, &tag, &what)) return NULL;
    ppv_ext *x = bridge(gen);
    int rc = STALE;
    int32_t comm = -1;
    if (x) {
        Py_BEGIN_ALLOW_THREADS rc = g.api->new_group(x, rank, v.buf,
                                                     (int32_t)((size_t)v.len / sizeof(int32_t)),
                                                     (int64_t)tag, &comm, what);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&v);
    return Py_BuildValue("(ii)", rc, (int)comm);
}

static PyObject *b_comm_of(PyObject *self, PyObject *args) {
    (void)self;
    long mask;
    if (!PyArg_ParseTuple(args, "l", &mask)) return NULL;
    if (g.nranks > PPV_PYRANK_GROUP_RANKS || mask <= 0 || mask >= (1L << g.nranks))
        return PyLong_FromLong(-1);
    return PyLong_FromLong(mask == (1L << g.nranks) - 1 ? 0 : mask);
}

static PyMethodDef bridge_methods[] = {
    {"begin", b_begin, METH_VARARGS, "wait for the rank's first turn"},
    {"end", b_end, METH_VARARGS, "the rank's function ended (error or None)"},
    {"send", b_send, METH_VARARGS, NULL},
    {"recv", b_recv, METH_VARARGS, NULL},
    {"broadcast", b_broadcast, METH_VARARGS, NULL},
    {"all_reduce_f32", b_all_reduce_f32, METH_VARARGS, NULL},
    {"all_gather", b_all_gather, METH_VARARGS, NULL},
    {"probe", b_probe, METH_VARARGS, NULL},
    {"yield_", b_yield, METH_VARARGS, NULL},
    {"wait_any", b_wait_any, METH_VARARGS, "block until a message from the group is there"},
    {"group_start", b_group_start, METH_VARARGS, NULL},
    {"group_end", b_group_end, METH_VARARGS, NULL},
    {"comm_of", b_comm_of, METH_VARARGS, NULL},
    {"new_group", b_new_group, METH_VARARGS, "a communicator of the world's: (rc, comm)"},
    {"isend", b_isend, METH_VARARGS, "post a send: (rc, id)"},
    {"irecv", b_irecv, METH_VARARGS, "post a receive: (rc, id)"},
    {"wait_op", b_wait_op, METH_VARARGS, "wait for a posted op"},
    {"test_op", b_test_op, METH_VARARGS, "whether a posted op is done: (rc, done)"},
    {"wait_some", b_wait_some, METH_VARARGS, "the first of posted ops done: (rc, which)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef bridge_def = {
    PyModuleDef_HEAD_INIT, "ppv._bridge", "ppv's mock world, for ppv.dist (made by ppv fuzz py)",
    -1, bridge_methods, NULL, NULL, NULL, NULL,
};

/* ---- the module's table ------------------------------------------------------ */

static void zygote_stop(ppv_pyrank *p);

static void py_close(ppv_pyrank *p) {
    if (!p) return;
    if (p->shared) {
        zygote_stop(p);
        free(p->pids);
        free(p->next);
        free(p);
        g.open--;
        return;
    }
    PyGILState_STATE s = PyGILState_Ensure();
    Py_XDECREF(p->function), Py_XDECREF(p->runner), Py_XDECREF(p->thread_cls);
    Py_XDECREF(p->threads);
    PyGILState_Release(s);
    free(p);
    g.open = 0;
    g.threads = 0;
}

/* Imports what ppv.dist needs; -1 with the Python error in err. */
static int import_all(ppv_pyrank *p, const char *file, const char *function, const char *pkgdir,
                      char *err, size_t errlen) {
    char why[1024];
    PyObject *sys_path = PySys_GetObject("path"); /* borrowed */
    PyObject *dir = PyUnicode_FromString(pkgdir);
    if (!sys_path || !dir || PyList_Insert(sys_path, 0, dir) < 0) goto python_error;
    Py_DECREF(dir);
    dir = NULL;
    PyObject *bridge_mod = PyModule_Create(&bridge_def);
    if (!bridge_mod || PyModule_AddIntConstant(bridge_mod, "ABORTED", PPV_ERR_ABORTED) < 0 ||
        PyModule_AddIntConstant(bridge_mod, "MISMATCH", PPV_ERR_MISMATCH) < 0 ||
        PyModule_AddIntConstant(bridge_mod, "USAGE", PPV_ERR_USAGE) < 0 ||
        PyModule_AddIntConstant(bridge_mod, "STALE", STALE) < 0 ||
        PyModule_AddIntConstant(bridge_mod, "TOO_BIG", PPV_ERR_TOO_BIG) < 0 ||
        PyModule_AddIntConstant(bridge_mod, "MESSAGE_BYTES", (long)g.message_bytes) < 0) {
        Py_XDECREF(bridge_mod);
        goto python_error;
    }
    PyObject *modules = PyImport_GetModuleDict(); /* borrowed */
    int bad = PyDict_SetItemString(modules, "ppv._bridge", bridge_mod);
    Py_DECREF(bridge_mod);
    if (bad < 0) goto python_error;
    PyObject *dist = PyImport_ImportModule("ppv.dist");
    if (!dist) goto python_error;
    p->runner = PyObject_GetAttrString(dist, "_run_rank");
    /* code written against torch.distributed runs unchanged: its calls are
     * routed to ppv.dist before the file is imported */
    PyObject *ready = PyObject_CallMethod(dist, "_prepare", "s", file);
    if (!ready) {
        Py_DECREF(dist);
        exception_text(why, sizeof why);
        errf(err, errlen, "%s: cannot ready torch.distributed for it: %s", file, why);
        return -1;
    }
    Py_DECREF(ready);
    if (!strcmp(function, "__main__")) { /* the script itself, as torchrun runs it */
        p->function = PyObject_CallMethod(dist, "_script", "s", file);
        Py_DECREF(dist);
        if (!p->function || !p->runner) goto python_error;
        if (!(p->threads = PyList_New(0))) goto python_error;
        PyObject *threading = PyImport_ImportModule("threading");
        p->thread_cls = threading ? PyObject_GetAttrString(threading, "Thread") : NULL;
        Py_XDECREF(threading);
        if (!p->thread_cls) goto python_error;
        /* its folder first on sys.path, as `python3 FILE` has it */
        const char *sl = strrchr(file, '/');
        PyObject *fd = sl ? PyUnicode_FromStringAndSize(file, sl - file) : PyUnicode_FromString(".");
        if (!fd || PyList_Insert(sys_path, 0, fd) < 0) {
            Py_XDECREF(fd);
            goto python_error;
        }
        Py_DECREF(fd);
        return 0;
    }
    Py_DECREF(dist);
    PyObject *threading = PyImport_ImportModule("threading");
    p->thread_cls = threading ? PyObject_GetAttrString(threading, "Thread") : NULL;
    Py_XDECREF(threading);
    if (!p->runner || !p->thread_cls) goto python_error;
    /* the user's file, as a module of its own name, as `python3 FILE` would
     * find its neighbours: its folder first on sys.path */
    const char *slash = strrchr(file, '/');
    PyObject *fdir = slash ? PyUnicode_FromStringAndSize(file, slash - file)
                           : PyUnicode_FromString(".");
    if (!fdir || PyList_Insert(sys_path, 0, fdir) < 0) {
        Py_XDECREF(fdir);
        goto python_error;
    }
    Py_DECREF(fdir);
    const char *base = slash ? slash + 1 : file;
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)(strlen(base) > 3 ? strlen(base) - 3 : 0), base);
    PyObject *util = PyImport_ImportModule("importlib.util");
    PyObject *spec = util ? PyObject_CallMethod(util, "spec_from_file_location", "ss", name, file)
                          : NULL;
    PyObject *mod = spec && spec != Py_None
                        ? PyObject_CallMethod(util, "module_from_spec", "O", spec)
                        : NULL;
    PyObject *loader = mod ? PyObject_GetAttrString(spec, "loader") : NULL;
    PyObject *done = loader ? PyObject_CallMethod(loader, "exec_module", "O", mod) : NULL;
    if (!done) {
        if (PyErr_Occurred()) exception_text(why, sizeof why);
        else snprintf(why, sizeof why, "it is not a Python file");
        errf(err, errlen, "%s: cannot import it: %s", file, why);
        Py_XDECREF(util), Py_XDECREF(spec), Py_XDECREF(mod), Py_XDECREF(loader);
        return -1;
    }
    Py_DECREF(done), Py_DECREF(loader), Py_DECREF(spec), Py_DECREF(util);
    p->function = PyObject_GetAttrString(mod, function);
    Py_DECREF(mod);
    if (!p->function || !PyCallable_Check(p->function)) {
        PyErr_Clear();
        errf(err, errlen, "%s: has no function %s (FILE.py:FUNCTION; it is called as "
                 "FUNCTION(rank, world_size) on every rank)", file, function);
        return -1;
    }
    if (!(p->threads = PyList_New(0))) goto python_error;
    return 0;
python_error:
    Py_XDECREF(dir);
    exception_text(why, sizeof why);
    errf(err, errlen, "cannot ready Python for %s: %s", file, why);
    return -1;
}

/* ---- ranks as processes: the zygote ------------------------------------------------ */

enum { Z_START = 1, Z_FINISH, Z_QUIT };

typedef struct zcmd {
    int32_t kind;
    long gen;       /* Z_START: the run's */
    double seconds; /* Z_FINISH: how long the ranks may take to end */
} zcmd;

typedef struct zreply {
    int32_t rc; /* 0, or -1 with text */
    char text[1024];
} zreply;

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int send_all(int fd, const void *buf, size_t n) {
    for (size_t done = 0; done < n;) {
        ssize_t k = send(fd, (const char *)buf + done, n - done, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        done += (size_t)k;
    }
    return 0;
}

/* Reads n bytes within seconds (< 0: no bound): 0, -1 (closed or failed),
 * or -2 (late). */
static int recv_all(int fd, void *buf, size_t n, double seconds) {
    double until = now_seconds() + seconds;
    for (size_t done = 0; done < n;) {
        int ms = -1;
        if (seconds >= 0) {
            double rest = until - now_seconds();
            if (rest <= 0) return -2;
            ms = (int)(rest * 1000) + 1;
        }
        struct pollfd f = {fd, POLLIN, 0};
        int k = poll(&f, 1, ms);
        if (k < 0 && errno != EINTR) return -1;
        if (k <= 0) continue;
        ssize_t m = recv(fd, (char *)buf + done, n - done, 0);
        if (m < 0 && errno == EINTR) continue;
        if (m <= 0) return -1;
        done += (size_t)m;
    }
    return 0;
}

/* How a process ended, in words. */
static void death_text(int status, char *buf, size_t n) {
    if (WIFSIGNALED(status))
        snprintf(buf, n, "its process was killed by signal %d (%s) before its function "
                 "returned", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        snprintf(buf, n, "its process exited with status %d before its function returned "
                 "(os._exit, or C code that calls exit)", WEXITSTATUS(status));
}

/* The zygote: takes the ended ranks' processes; a rank of the run that
 * died before its end is ended on the bridge with how it died. */
static void reap_ranks(ppv_pyrank *p) {
    struct signalfd_siginfo si;
    while (read(p->sigfd, &si, sizeof si) == (ssize_t)sizeof si) {
    }
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
        for (int32_t r = 0; r < p->nranks; r++) {
            if (p->next[r] == pid) p->next[r] = 0; /* a waiting one: its batch is remade */
            if (p->pids[r] != pid) continue;
            p->pids[r] = 0;
            char why[256];
            death_text(status, why, sizeof why);
            g.api->end(g.x, r, why); /* no news when the rank had ended */
        }
}

/* The zygote: kills a batch of ranks' processes and takes them. */
static void kill_batch(pid_t *pids, int32_t n) {
    for (int32_t r = 0; r < n; r++)
        if (pids[r] > 0) kill(pids[r], SIGKILL);
    for (int32_t r = 0; r < n; r++)
        if (pids[r] > 0) {
            waitpid(pids[r], NULL, 0); /* SIGKILL: it goes at once */
            pids[r] = 0;
        }
}

/* Python's buffered output, out before the rank ends (so it comes in
 * the order the scheduler gave, before the next run's). */
static void flush_output(void) {
    const char *names[] = {"stdout", "stderr"};
    for (int k = 0; k < 2; k++) {
        PyObject *f = PySys_GetObject(names[k]); /* borrowed */
        PyObject *rc = f && f != Py_None ? PyObject_CallMethod(f, "flush", NULL) : NULL;
        Py_XDECREF(rc);
        PyErr_Clear();
    }
}

/* A rank's process, forked by the zygote ahead of its run: waits for the
 * run's number on go, runs the rank and leaves. */
static void rank_process(ppv_pyrank *p, int32_t r, pid_t zygote, int go, const sigset_t *mask) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != zygote) _exit(1);
    PyOS_AfterFork_Child();
    close(p->sigfd);
    close(p->sock);
    sigprocmask(SIG_SETMASK, mask, NULL);
    long gen;
    ssize_t got;
    while ((got = read(go, &gen, sizeof gen)) < 0 && errno == EINTR) {
    }
    if (got != (ssize_t)sizeof gen) _exit(0); /* no run for it: the zygote stopped */
    close(go);
    g.gen = gen;
    PyObject *rc = PyObject_CallFunction(p->runner, "Oiil", p->function, (int)r, (int)p->nranks,
                                         g.gen);
    if (!rc && !g.ended) { /* _run_rank reports the function's errors: this is its own */
        char why[1024];
        exception_text(why, sizeof why);
        flush_output();
        g.api->end(g.x, r, why);
    }
    PyErr_Clear();
    Py_XDECREF(rc);
    flush_output();
    _exit(0);
}

/* The zygote: forks the next run's ranks, each waiting for its go. 0, or
 * -1 with out's text. */
static int fork_batch(ppv_pyrank *p, const sigset_t *mask, zreply *out) {
    int go[2];
    if (pipe2(go, O_CLOEXEC) < 0) {
        out->rc = -1;
        snprintf(out->text, sizeof out->text, "cannot start the ranks' processes: %s",
                 strerror(errno));
        return -1;
    }
    for (int32_t r = 0; r < p->nranks; r++) {
        PyOS_BeforeFork();
        pid_t pid = fork();
        if (pid == 0) {
            close(go[1]);
            rank_process(p, r, getppid(), go[0], mask);
        }
        PyOS_AfterFork_Parent();
        if (pid < 0) {
            out->rc = -1;
            snprintf(out->text, sizeof out->text, "cannot start rank %d's process: %s", (int)r,
                     strerror(errno));
            close(go[0]);
            close(go[1]);
            kill_batch(p->next, p->nranks);
            return -1;
        }
        p->next[r] = pid;
    }
    close(go[0]);
    p->go = go[1];
    return 0;
}

/* The zygote: the run gen's ranks go (the batch forked ahead of it, or
 * one forked now when one of that died), and the next run's are forked. */
static void start_ranks(ppv_pyrank *p, long gen, const sigset_t *mask, zreply *out) {
    g.gen = gen;
    int whole = p->go >= 0;
    for (int32_t r = 0; whole && r < p->nranks; r++) whole = p->next[r] > 0;
    if (!whole) {
        kill_batch(p->next, p->nranks);
        if (p->go >= 0) close(p->go);
        p->go = -1;
        if (fork_batch(p, mask, out) < 0) return;
    }
    for (int32_t r = 0; r < p->nranks; r++)
        if (write(p->go, &gen, sizeof gen) != (ssize_t)sizeof gen) { /* a pipe of room */
            out->rc = -1;
            snprintf(out->text, sizeof out->text, "cannot start the ranks: %s", strerror(errno));
            kill_batch(p->next, p->nranks);
            break;
        }
    close(p->go);
    p->go = -1;
    /* the last run's ranks have ended (finish_ranks): those still leaving are reaped as they go */
    memcpy(p->pids, p->next, (size_t)p->nranks * sizeof *p->pids);
    memset(p->next, 0, (size_t)p->nranks * sizeof *p->next);
}

/* The zygote: waits at most seconds for each of the run's ranks to end
 * (its process gone, or ended on the bridge: it only leaves then); kills
 * those that do not, and says so. */
static void finish_ranks(ppv_pyrank *p, double seconds, zreply *out) {
    double until = now_seconds() + seconds;
    int32_t left;
    for (;;) {
        reap_ranks(p);
        left = -1;
        for (int32_t r = p->nranks - 1; r >= 0; r--)
            if (p->pids[r] > 0 && !g.api->ended(g.x, r)) left = r;
        double rest = until - now_seconds();
        if (left < 0 || rest <= 0) break;
        struct pollfd f = {p->sigfd, POLLIN, 0};
        poll(&f, 1, rest < 0.002 ? 1 : 2); /* an end on the bridge wakes no fd: look again soon */
    }
    if (left < 0) { /* each has ended: its exit is no news (the bridge is reset for the next run) */
        memset(p->pids, 0, (size_t)p->nranks * sizeof *p->pids);
        return;
    }
    out->rc = -1;
    snprintf(out->text, sizeof out->text, "rank %d's process did not end within %g s of its "
             "run's end (does it catch DistError and go on?); it was killed", (int)left, seconds);
    kill_batch(p->pids, p->nranks);
}

static int import_all(ppv_pyrank *p, const char *file, const char *function, const char *pkgdir,
                      char *err, size_t errlen);

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux 6.1 */
#endif

/* The zygote, after the import: its private anonymous memory (the heap
 * and malloc's mappings, where the import's objects are) in huge pages
 * where the kernel has them. Every run forks a process a rank from the
 * zygote and ends it; both copy or drop the zygote's page tables, and a
 * 2 MiB page is one entry where it was 512 (torch's import leaves some
 * 100 MiB of it, and fork and exit took nearly half of a torch run's CPU).
 * Nothing a rank sees changes; where the kernel refuses (no THP, older
 * than 6.1) it stays as it was. */
static void huge_pages(void) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return;
    char line[4352];
    const uintptr_t huge = (uintptr_t)2 << 20;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char perms[8], path[4096] = "";
        if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %4095s", &lo, &hi, perms, path) < 3) continue;
        if (strcmp(perms, "rw-p") != 0 || (path[0] && strcmp(path, "[heap]") != 0)) continue;
        uintptr_t a = ((uintptr_t)lo + huge - 1) & ~(huge - 1), b = (uintptr_t)hi & ~(huge - 1);
        if (b <= a) continue;
        if (madvise((void *)a, b - a, MADV_HUGEPAGE) == 0) madvise((void *)a, b - a, MADV_COLLAPSE);
    }
    fclose(f);
}

/* The zygote's life: an interpreter, the file imported, then the ranks
 * of every run ppv asks for. Never returns. */
static void zygote_main(ppv_pyrank *p, const char *file, const char *function,
                        const char *pkgdir, pid_t parent) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    g.processes = 1;
    setenv("OMP_NUM_THREADS", "1", 0); /* as torchrun sets it for more than one process */
    zreply rep;
    memset(&rep, 0, sizeof rep);
    sigset_t chld, mask;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, &chld, &mask) < 0 ||
        (p->sigfd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC)) < 0) {
        rep.rc = -1;
        snprintf(rep.text, sizeof rep.text, "cannot watch the ranks' processes: %s",
                 strerror(errno));
        send_all(p->sock, &rep, sizeof rep);
        _exit(1);
    }
    Py_InitializeEx(0); /* no signal handlers of Python's */
    if (import_all(p, file, function, pkgdir, rep.text, sizeof rep.text) < 0) {
        rep.rc = -1;
        send_all(p->sock, &rep, sizeof rep);
        _exit(0);
    }
    g.x = p->shared;
    if (!getenv("PPV_NO_HUGE")) huge_pages();
    PyObject *gc = PyImport_ImportModule("gc"); /* what the import made, never collected again: */
    PyObject *frozen = gc ? PyObject_CallMethod(gc, "freeze", NULL) : NULL; /* no copy of it */
    Py_XDECREF(frozen), Py_XDECREF(gc);                                     /* in a rank's pages */
    PyErr_Clear();
    if (fork_batch(p, &mask, &rep) < 0) {
        send_all(p->sock, &rep, sizeof rep);
        _exit(1);
    }
    if (send_all(p->sock, &rep, sizeof rep) < 0) _exit(1);
    for (;;) {
        struct pollfd f[2] = {{p->sock, POLLIN, 0}, {p->sigfd, POLLIN, 0}};
        if (poll(f, 2, -1) < 0 && errno != EINTR) break;
        if (f[1].revents) reap_ranks(p);
        if (!f[0].revents) continue;
        zcmd c;
        if (recv_all(p->sock, &c, sizeof c, -1) < 0) break; /* ppv is gone */
        memset(&rep, 0, sizeof rep);
        if (c.kind == Z_START) start_ranks(p, c.gen, &mask, &rep);
        else if (c.kind == Z_FINISH) finish_ranks(p, c.seconds, &rep);
        else break;
        if (send_all(p->sock, &rep, sizeof rep) < 0) break;
        /* the next run's ranks, forked while this one runs */
        if (c.kind == Z_START && rep.rc == 0 && fork_batch(p, &mask, &rep) < 0) break;
    }
    kill_batch(p->pids, p->nranks);
    kill_batch(p->next, p->nranks);
    _exit(0);
}

/* ppv's side: one exchange with the zygote, its answer awaited at most
 * seconds; 0, or -1 with err (the zygote is then stopped). */
static int zygote_ask(ppv_pyrank *p, const zcmd *c, double seconds, const char *doing, char *err,
                      size_t errlen) {
    zreply rep;
    int rc = c ? send_all(p->sock, c, sizeof *c) : 0;
    if (rc == 0) rc = recv_all(p->sock, &rep, sizeof rep, seconds);
    if (rc == 0 && rep.rc == 0) return 0;
    if (rc == 0) {
        rep.text[sizeof rep.text - 1] = 0;
        errf(err, errlen, "%s", rep.text);
        if (c) return -1; /* the zygote goes on: a run's trouble */
    } else if (rc == -2) {
        errf(err, errlen, "the Python ranks' process did not finish %s within %g s", doing,
             seconds);
    } else {
        int status = 0;
        pid_t z = waitpid(p->zygote, &status, WNOHANG);
        if (z == p->zygote) {
            char why[256];
            death_text(status, why, sizeof why);
            errf(err, errlen, "the Python ranks' process ended %s: %s", doing, why);
            p->zygote = 0;
        } else {
            errf(err, errlen, "the Python ranks' process stopped answering %s", doing);
        }
    }
    zygote_stop(p);
    return -1;
}

static void zygote_stop(ppv_pyrank *p) {
    if (p->sock >= 0) {
        zcmd c = {Z_QUIT, 0, 0};
        send_all(p->sock, &c, sizeof c);
        close(p->sock);
        p->sock = -1;
    }
    if (p->zygote <= 0) return;
    /* it kills its ranks and leaves: a second at most, then it is killed */
    for (int k = 0; k < 1000 && waitpid(p->zygote, NULL, WNOHANG) == 0; k++) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
        if (k == 999) {
            kill(p->zygote, SIGKILL);
            waitpid(p->zygote, NULL, 0);
        }
    }
    p->zygote = 0;
}

/* ppv's side of open with a shared bridge: the zygote forked, the file
 * imported there. 0, or -1 with err. */
static int zygote_open(ppv_pyrank *p, const char *file, const char *function, const char *pkgdir,
                       double import_seconds, char *err, size_t errlen) {
    int sv[2];
    if (!(p->pids = calloc((size_t)p->nranks, sizeof *p->pids)) ||
        !(p->next = calloc((size_t)p->nranks, sizeof *p->next)) ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        errf(err, errlen, "cannot ready the ranks' processes: %s", strerror(errno));
        p->sock = -1;
        return -1;
    }
    fflush(NULL); /* nothing of ppv's output twice */
    pid_t parent = getpid();
    pid_t z = fork();
    if (z == 0) {
        close(sv[0]);
        p->sock = sv[1];
        zygote_main(p, file, function, pkgdir, parent);
    }
    close(sv[1]);
    p->sock = sv[0];
    if (z < 0) {
        errf(err, errlen, "cannot start the Python ranks' process: %s", strerror(errno));
        close(p->sock);
        p->sock = -1;
        return -1;
    }
    p->zygote = z;
    char doing[4200];
    snprintf(doing, sizeof doing, "importing %s", file);
    return zygote_ask(p, NULL, import_seconds, doing, err, errlen);
}

static ppv_pyrank *py_open(const char *file, const char *function, int32_t nranks,
                           const ppv_pyrank_api *api, const char *pkgdir, ppv_ext *shared,
                           double import_seconds, char *err, size_t errlen) {
    if (g.open && (g.threads || !shared)) { /* threads share this process's interpreter */
        errf(err, errlen, "one Python target at a time where its ranks are threads");
        return NULL;
    }
    ppv_pyrank *p = calloc(1, sizeof *p);
    if (!p) {
        errf(err, errlen, "out of memory");
        return NULL;
    }
    p->nranks = nranks;
    p->shared = shared;
    g.message_bytes = shared ? api->message_bytes(shared) : 0;
    p->sock = -1;
    p->sigfd = -1;
    p->go = -1;
    g.api = api;
    g.nranks = nranks;
    g.open++;
    g.threads = !shared;
    if (shared) {
        if (zygote_open(p, file, function, pkgdir, import_seconds, err, errlen) < 0) {
            py_close(p);
            return NULL;
        }
        return p;
    }
    PyGILState_STATE s = PyGILState_UNLOCKED;
    int fresh = !Py_IsInitialized();
    if (fresh) Py_InitializeEx(0); /* no signal handlers of Python's */
    else s = PyGILState_Ensure();
    int rc = import_all(p, file, function, pkgdir, err, errlen);
    if (fresh) PyEval_SaveThread(); /* no Python on this thread from here: PyGILState_Ensure */
    else PyGILState_Release(s);
    if (rc < 0) {
        py_close(p);
        return NULL;
    }
    return p;
}

static int py_start(ppv_pyrank *p, ppv_ext *x, char *err, size_t errlen) {
    if (p->shared) {
        if (x != p->shared) {
            errf(err, errlen, "ranks as processes run on the bridge they were opened with");
            return -1;
        }
        if (p->zygote <= 0) {
            errf(err, errlen, "the Python ranks' process has stopped");
            return -1;
        }
        zcmd c = {Z_START, ++p->gen, 0};
        return zygote_ask(p, &c, 60, "starting the ranks", err, errlen);
    }
    PyGILState_STATE s = PyGILState_Ensure();
    g.x = x;
    g.gen++;
    int rc = PyList_SetSlice(p->threads, 0, PyList_GET_SIZE(p->threads), NULL);
    for (int32_t r = 0; rc == 0 && r < p->nranks; r++) {
        PyObject *kw = Py_BuildValue("{s:O,s:(O,i,i,l),s:O,s:s}", "target", p->runner, "args",
                                     p->function, (int)r, (int)p->nranks, g.gen, "daemon",
                                     Py_True, "name", "ppv rank");
        PyObject *empty = PyTuple_New(0);
        PyObject *t = kw && empty ? PyObject_Call(p->thread_cls, empty, kw) : NULL;
        PyObject *ok = t ? PyObject_CallMethod(t, "start", NULL) : NULL;
        if (!ok || PyList_Append(p->threads, t) < 0) rc = -1;
        Py_XDECREF(kw), Py_XDECREF(empty), Py_XDECREF(t), Py_XDECREF(ok);
    }
    if (rc < 0) {
        char why[1024];
        exception_text(why, sizeof why);
        errf(err, errlen, "cannot start the ranks' Python threads: %s", why);
    }
    PyGILState_Release(s);
    return rc;
}

static int py_finish(ppv_pyrank *p, double seconds, char *err, size_t errlen) {
    if (p->shared) {
        if (p->zygote <= 0) {
            errf(err, errlen, "the Python ranks' process has stopped");
            return -1;
        }
        zcmd c = {Z_FINISH, 0, seconds};
        return zygote_ask(p, &c, seconds + 30, "ending the run", err, errlen);
    }
    PyGILState_STATE s = PyGILState_Ensure();
    int rc = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(p->threads); i++) {
        PyObject *t = PyList_GET_ITEM(p->threads, i); /* borrowed */
        PyObject *j = PyObject_CallMethod(t, "join", "d", seconds);
        Py_XDECREF(j);
        PyObject *alive = PyObject_CallMethod(t, "is_alive", NULL);
        if (!j || !alive || PyObject_IsTrue(alive)) {
            PyErr_Clear();
            errf(err, errlen, "rank %d's Python thread did not end within %g s of its run's "
                     "end (does it catch DistError and go on?)", (int)i, seconds);
            rc = -1;
        }
        Py_XDECREF(alive);
        if (rc < 0) break;
    }
    g.x = NULL; /* a thread left over finds no bridge (STALE) */
    PyGILState_Release(s);
    return rc;
}

static const ppv_pyrank_module table = {
    .abi = PPV_PYRANK_ABI,
    .open = py_open,
    .start = py_start,
    .finish = py_finish,
    .close = py_close,
};

const ppv_pyrank_module *ppv_pyrank_entry(void) {
    return &table;
}
