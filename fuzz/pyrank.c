/* pyrank.c - the Python ranks module (libppv_pyrank.so): `ppv fuzz py`
 * runs a Python function on every rank of a mock world (pyrank.h).
 *
 * One embedded interpreter; for every run, one Python thread a rank
 * (threading.Thread running ppv.dist._run_rank), each bound to the run's
 * bridge through ppv._bridge, a module made here. A bridge call releases
 * the interpreter's lock while it waits, so the one thread the world lets
 * run takes it: the threads' Python runs one at a time, in the order the
 * scheduler decides. Every call names its run (a generation number): a
 * thread left over from an earlier run gets STALE and touches nothing.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyrank.h"

enum { STALE = -199 };

struct ppv_pyrank {
    int32_t nranks;
    PyObject *function; /* FUNCTION */
    PyObject *runner;   /* ppv.dist._run_rank */
    PyObject *thread_cls; /* threading.Thread */
    PyObject *threads;  /* this run's, a list */
};

static struct {
    const ppv_pyrank_api *api;
    ppv_ext *x;      /* the running run's bridge */
    long gen;        /* its number */
    int32_t nranks;
    int open;
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
    {"isend", b_isend, METH_VARARGS, "post a send: (rc, id)"},
    {"irecv", b_irecv, METH_VARARGS, "post a receive: (rc, id)"},
    {"wait_op", b_wait_op, METH_VARARGS, "wait for a posted op"},
    {"test_op", b_test_op, METH_VARARGS, "whether a posted op is done: (rc, done)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef bridge_def = {
    PyModuleDef_HEAD_INIT, "ppv._bridge", "ppv's mock world, for ppv.dist (made by ppv fuzz py)",
    -1, bridge_methods, NULL, NULL, NULL, NULL,
};

/* ---- the module's table ------------------------------------------------------ */

static void py_close(ppv_pyrank *p) {
    if (!p) return;
    PyGILState_STATE s = PyGILState_Ensure();
    Py_XDECREF(p->function), Py_XDECREF(p->runner), Py_XDECREF(p->thread_cls);
    Py_XDECREF(p->threads);
    PyGILState_Release(s);
    free(p);
    g.open = 0;
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
        PyModule_AddIntConstant(bridge_mod, "STALE", STALE) < 0) {
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

static ppv_pyrank *py_open(const char *file, const char *function, int32_t nranks,
                           const ppv_pyrank_api *api, const char *pkgdir, char *err,
                           size_t errlen) {
    if (g.open) {
        errf(err, errlen, "one Python target at a time");
        return NULL;
    }
    ppv_pyrank *p = calloc(1, sizeof *p);
    if (!p) {
        errf(err, errlen, "out of memory");
        return NULL;
    }
    p->nranks = nranks;
    g.api = api;
    g.nranks = nranks;
    PyGILState_STATE s = PyGILState_UNLOCKED;
    int fresh = !Py_IsInitialized();
    if (fresh) Py_InitializeEx(0); /* no signal handlers of Python's */
    else s = PyGILState_Ensure();
    g.open = 1;
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
