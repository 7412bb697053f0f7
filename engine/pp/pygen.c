/* pygen.c - the Python bridge (libppv_pygen.so): a generator written in
 * Python, run by an embedded interpreter that ppv loads only when a .py
 * generator is asked for (generator.c). The module defines
 *
 *   NAME = "tp-mlp"; VERSION = "1"; ABI = 2
 *   KV_FRAME_LOCAL = True          (optional: PPV_GENERATOR_KV_FRAME_LOCAL)
 *   def create(setup, comm): ...   -> an object with call(**args),
 *                                     kv_reset() and, optionally,
 *                                     kv_snapshot() and destroy()
 *
 * setup is a dict of ppv_generator_setup's fields; comm has rank, size,
 * all_reduce_sum(a, group=GROUP_MESH) and broadcast(a, root, group=...)
 * (in place) and all_gather(a, group=...) (a new array, one row a member),
 * on C-contiguous numpy arrays (float32 for the sum). call's arguments are
 * latents (uint16 bf16 bits, (frames, channels, h, w), read-only), cond
 * ((cond_len, cond_dim), read-only), out (writable, or None for a cache
 * write), timestep, cache_bias, write_cache, call_id, chunk_index,
 * cache_epoch and kind ("step", "rebuild" or "cache_write"): the arrays are ppv's buffers, no copies, valid during the
 * call only (keeping one is refused).
 *
 * On the mock transport the mesh ranks are coroutines of one thread, each
 * on its own stack, switched inside a collective. Each rank therefore runs
 * Python in a thread state of its own, swapped in when C calls into Python
 * and swapped out (for the process's own) around every collective, so no
 * rank's Python frames are ever seen by another. The GIL stays with the
 * one thread throughout.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <stdio.h>
#include <string.h>

#include "ppv_generator.h"

/* The loaded modules, each with its table. A table's create is told
 * nothing but the setup, so each slot has a create of its own
 * (SLOT_CREATE below); a process may load MAX_MODULES modules. */
enum { MAX_MODULES = 8 };

typedef struct module_slot {
    char path[4096];
    PyObject *module;
    char name[64], version[32];
    ppv_generator table;
} module_slot;

static struct {
    module_slot slots[MAX_MODULES];
    int nslots;
    PyTypeObject *comm_type;
    PyInterpreterState *interp;
    PyThreadState *main; /* the process's own, current whenever no rank runs Python */
} g_py;

typedef struct rank {
    PyThreadState *ts;
    PyObject *obj;  /* what create returned */
    PyObject *comm; /* the Comm object lent to it */
    int comm_rc;    /* a collective's failure: returned as it is */
    int32_t h, w, cond_dim;
} rank;

typedef struct comm_object {
    PyObject_HEAD
    ppv_generator_comm comm;
    rank *owner;
} comm_object;

/* The pending exception as "Type: message (file:line in function)" in err. */
static void exception_text(char *err, size_t errlen) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    const char *tname = type ? ((PyTypeObject *)type)->tp_name : "?";
    PyObject *s = value ? PyObject_Str(value) : NULL;
    const char *msg = s ? PyUnicode_AsUTF8(s) : NULL;
    char where[512] = "";
    for (PyTracebackObject *t = (PyTracebackObject *)tb; t; t = t->tb_next)
        if (!t->tb_next) {
            PyCodeObject *code = PyFrame_GetCode(t->tb_frame);
            const char *file = code ? PyUnicode_AsUTF8(code->co_filename) : NULL;
            const char *fn = code ? PyUnicode_AsUTF8(code->co_name) : NULL;
            snprintf(where, sizeof where, " (%s:%d in %s)", file ? file : "?", t->tb_lineno,
                     fn ? fn : "?");
            Py_XDECREF(code);
        }
    snprintf(err, errlen, "%s: %s%s", tname, msg ? msg : "", where);
    PyErr_Clear();
    Py_XDECREF(s);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
}

/* ---- comm: the collectives, called from Python ------------------------------------- */

/* a as a C-contiguous array of its own data (dtype_num, or any when < 0),
 * writable when asked; NULL with a TypeError. */
static PyArrayObject *array_arg(PyObject *a, int dtype_num, int writable, const char *what) {
    if (!PyArray_Check(a) || !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)a) ||
        (dtype_num >= 0 && PyArray_TYPE((PyArrayObject *)a) != dtype_num) ||
        (writable && !PyArray_ISWRITEABLE((PyArrayObject *)a))) {
        PyErr_Format(PyExc_TypeError, "%s needs a C-contiguous%s numpy array%s", what,
                     writable ? ", writable" : "", dtype_num == NPY_FLOAT32 ? " of float32" : "");
        return NULL;
    }
    return (PyArrayObject *)a;
}

/* Around a collective: park() swaps this rank's thread state out
 * (another rank may run Python while it waits), unpark() swaps it back. A
 * failure raises RuntimeError and is kept, to be returned as it is; -1
 * then. */
static PyThreadState *park(void) {
    return PyThreadState_Swap(g_py.main);
}

static int unpark(comm_object *self, PyThreadState *mine, int rc) {
    PyThreadState_Swap(mine);
    if (!rc) return 0;
    self->owner->comm_rc = rc;
    PyErr_SetString(PyExc_RuntimeError,
                    "a collective failed: the run has failed (ppv has recorded why)");
    return -1;
}

static PyObject *comm_all_reduce_sum(comm_object *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"a", "group", NULL};
    PyObject *a;
    int group = PPV_GENERATOR_GROUP_MESH;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|i", names, &a, &group)) return NULL;
    PyArrayObject *arr = array_arg(a, NPY_FLOAT32, 1, "all_reduce_sum");
    if (!arr) return NULL;
    PyThreadState *mine = park();
    int rc = self->comm.all_reduce_sum(self->comm.ctx, group, PyArray_DATA(arr),
                                       (size_t)PyArray_SIZE(arr));
    if (unpark(self, mine, rc)) return NULL;
    Py_RETURN_NONE;
}

static PyObject *comm_broadcast(comm_object *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"a", "root", "group", NULL};
    PyObject *a;
    int root = 0, group = PPV_GENERATOR_GROUP_MESH;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|ii", names, &a, &root, &group)) return NULL;
    PyArrayObject *arr = array_arg(a, -1, 1, "broadcast");
    if (!arr) return NULL;
    PyThreadState *mine = park();
    int rc = self->comm.broadcast(self->comm.ctx, group, PyArray_DATA(arr),
                                  (size_t)PyArray_NBYTES(arr), root);
    if (unpark(self, mine, rc)) return NULL;
    Py_RETURN_NONE;
}

static PyObject *comm_all_gather(comm_object *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"a", "group", NULL};
    PyObject *a;
    int group = PPV_GENERATOR_GROUP_MESH;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|i", names, &a, &group)) return NULL;
    PyArrayObject *arr = array_arg(a, -1, 0, "all_gather");
    if (!arr) return NULL;
    int nd = PyArray_NDIM(arr);
    npy_intp dims[NPY_MAXDIMS];
    dims[0] = self->comm.size;
    if (nd + 1 > NPY_MAXDIMS) return PyErr_Format(PyExc_ValueError, "too many dimensions");
    memcpy(dims + 1, PyArray_DIMS(arr), (size_t)nd * sizeof *dims);
    PyArray_Descr *d = PyArray_DESCR(arr);
    Py_INCREF(d);
    PyObject *all = PyArray_Empty(nd + 1, dims, d, 0);
    if (!all) return NULL;
    PyThreadState *mine = park();
    int rc = self->comm.all_gather(self->comm.ctx, group, PyArray_DATA(arr),
                                   PyArray_DATA((PyArrayObject *)all), (size_t)PyArray_NBYTES(arr));
    if (unpark(self, mine, rc)) {
        Py_DECREF(all);
        return NULL;
    }
    return all;
}

static PyObject *comm_get_rank(comm_object *self, void *closure) {
    (void)closure;
    return PyLong_FromLong(self->comm.rank);
}

static PyObject *comm_get_size(comm_object *self, void *closure) {
    (void)closure;
    return PyLong_FromLong(self->comm.size);
}

static PyMethodDef comm_methods[] = {
    {"all_reduce_sum", (PyCFunction)(void (*)(void))comm_all_reduce_sum,
     METH_VARARGS | METH_KEYWORDS, "a (float32) becomes the sum over the group, in member order"},
    {"all_gather", (PyCFunction)(void (*)(void))comm_all_gather, METH_VARARGS | METH_KEYWORDS,
     "every member's a, one row a member"},
    {"broadcast", (PyCFunction)(void (*)(void))comm_broadcast, METH_VARARGS | METH_KEYWORDS,
     "a becomes member root's a"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef comm_getset[] = {
    {"rank", (getter)comm_get_rank, NULL, "this rank's place in the mesh", NULL},
    {"size", (getter)comm_get_size, NULL, "the mesh's size", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot comm_slots[] = {
    {Py_tp_methods, comm_methods},
    {Py_tp_getset, comm_getset},
    {Py_tp_doc, "ppv's collectives, lent to a generator"},
    {0, NULL},
};

static PyType_Spec comm_spec = {"ppv_generator.Comm", sizeof(comm_object), 0, Py_TPFLAGS_DEFAULT,
                                comm_slots};

/* ---- the table's functions, called from C ------------------------------------------- */

/* Enters Python as rank r; leave() makes the process's own thread state
 * current again. Not "whatever ran before": a rank that entered while
 * another was parked in a collective would otherwise leave that one's
 * parked state behind it, and the interpreter with no thread state once
 * the run is over. */
static void enter(rank *r) {
    PyThreadState_Swap(r->ts);
}

static void leave(void) {
    PyThreadState_Swap(g_py.main);
}

/* The result of a call into Python: 0, the collective's failure, or the
 * exception as err. Consumes res. */
static int finish(rank *r, PyObject *res, char *err, size_t errlen) {
    if (res) {
        Py_DECREF(res);
        return 0;
    }
    exception_text(err, errlen);
    if (r->comm_rc) {
        int rc = r->comm_rc;
        r->comm_rc = 0;
        return rc;
    }
    return -1;
}

static PyObject *setup_dict(const ppv_generator_setup *s) {
    return Py_BuildValue("{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:s,s:s}", "mesh_rank", s->mesh_rank,
                         "mesh_size", s->mesh_size, "latent_h", s->latent_h, "latent_w",
                         s->latent_w, "frames", s->frames, "channels", s->channels, "kv_window",
                         s->kv_window, "cond_dim", s->cond_dim, "params", s->params, "device",
                         s->device);
}

static int py_destroy(void *state, char *err, size_t errlen) {
    rank *r = state;
    if (!r) return 0;
    int rc = 0;
    enter(r);
    if (r->obj && PyObject_HasAttrString(r->obj, "destroy"))
        rc = finish(r, PyObject_CallMethod(r->obj, "destroy", NULL), err, errlen);
    Py_XDECREF(r->obj);
    Py_XDECREF(r->comm);
    leave();
    PyThreadState_Clear(r->ts);
    PyThreadState_Delete(r->ts);
    PyMem_RawFree(r);
    return rc;
}

static int py_create(const module_slot *m, const ppv_generator_setup *s,
                     const ppv_generator_comm *comm, void **state, char *err, size_t errlen) {
    rank *r = PyMem_RawCalloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    r->h = s->latent_h;
    r->w = s->latent_w;
    r->cond_dim = s->cond_dim;
    r->ts = PyThreadState_New(g_py.interp); /* another rank's may be swapped out now */
    if (!r->ts) {
        PyMem_RawFree(r);
        snprintf(err, errlen, "cannot make a Python thread state");
        return -1;
    }
    enter(r);
    comm_object *c = PyObject_New(comm_object, g_py.comm_type);
    PyObject *setup = setup_dict(s);
    int rc = -1;
    if (c && setup) {
        c->comm = *comm;
        c->owner = r;
        r->comm = (PyObject *)c;
        c = NULL;
        r->obj = PyObject_CallMethod(m->module, "create", "OO", setup, r->comm);
        rc = r->obj ? 0 : finish(r, NULL, err, errlen);
        if (!rc && r->obj == Py_None) {
            snprintf(err, errlen, "create returned None");
            rc = -1;
        }
    } else {
        exception_text(err, errlen);
    }
    Py_XDECREF((PyObject *)c);
    Py_XDECREF(setup);
    leave();
    if (rc) {
        char ignored[16];
        py_destroy(r, ignored, sizeof ignored);
        return rc;
    }
    *state = r;
    return 0;
}

static int py_kv_reset(void *state, char *err, size_t errlen) {
    rank *r = state;
    enter(r);
    int rc = finish(r, PyObject_CallMethod(r->obj, "kv_reset", NULL), err, errlen);
    leave();
    return rc;
}

static int py_kv_snapshot(void *state, float *dst, size_t cap, size_t *count, char *err,
                          size_t errlen) {
    rank *r = state;
    enter(r);
    int rc = 0;
    *count = 0;
    if (PyObject_HasAttrString(r->obj, "kv_snapshot")) {
        PyObject *res = PyObject_CallMethod(r->obj, "kv_snapshot", NULL);
        if (!res) {
            rc = finish(r, NULL, err, errlen);
        } else if (res != Py_None) {
            PyObject *a = PyArray_FROMANY(res, NPY_FLOAT32, 0, 0, NPY_ARRAY_C_CONTIGUOUS);
            if (!a) {
                rc = finish(r, NULL, err, errlen);
            } else {
                *count = (size_t)PyArray_SIZE((PyArrayObject *)a);
                if (dst && cap < *count) {
                    snprintf(err, errlen, "a snapshot of %zu floats does not fit %zu", *count,
                             cap);
                    rc = -1;
                } else if (dst) {
                    memcpy(dst, PyArray_DATA((PyArrayObject *)a), *count * sizeof *dst);
                }
                Py_DECREF(a);
            }
        }
        Py_XDECREF(res);
    }
    leave();
    return rc;
}

/* ppv's buffer as a numpy array (no copy); read-only unless writable. */
static PyObject *wrap(const uint16_t *data, int nd, npy_intp *dims, int writable) {
    PyObject *a = PyArray_SimpleNewFromData(nd, dims, NPY_UINT16, (void *)data);
    if (a && !writable) PyArray_CLEARFLAGS((PyArrayObject *)a, NPY_ARRAY_WRITEABLE);
    return a;
}

/* Drops a wrapper of ppv's buffer; -1 when Python kept it past the call. */
static int unwrap(PyObject *a) {
    if (!a) return 0;
    int kept = Py_REFCNT(a) > 1;
    Py_DECREF(a);
    return kept ? -1 : 0;
}

static int py_call(void *state, const ppv_generator_call *a, char *err, size_t errlen) {
    rank *r = state;
    enter(r);
    npy_intp ld[4] = {a->frames, PPV_GENERATOR_CHANNELS, r->h, r->w};
    npy_intp cd[2] = {a->cond_len, r->cond_dim};
    PyObject *lat = wrap(a->latents, 4, ld, 0);
    PyObject *cond = wrap(a->cond, 2, cd, 0);
    PyObject *out = a->out ? wrap(a->out, 4, ld, 1) : (Py_INCREF(Py_None), Py_None);
    PyObject *kw = lat && cond && out
                       ? Py_BuildValue("{s:O,s:O,s:O,s:f,s:f,s:i,s:L,s:L,s:L,s:s}", "latents",
                                       lat, "cond", cond, "out", out, "timestep",
                                       (double)a->timestep, "cache_bias", (double)a->cache_bias,
                                       "write_cache", (int)a->write_cache, "call_id",
                                       (long long)a->call_id, "chunk_index",
                                       (long long)a->chunk_index, "cache_epoch",
                                       (long long)a->cache_epoch, "kind",
                                       a->kind == PPV_GENERATOR_CALL_REBUILD       ? "rebuild"
                                       : a->kind == PPV_GENERATOR_CALL_CACHE_WRITE ? "cache_write"
                                                                                   : "step")
                       : NULL;
    PyObject *meth = kw ? PyObject_GetAttrString(r->obj, "call") : NULL;
    PyObject *args = meth ? PyTuple_New(0) : NULL;
    PyObject *res = args ? PyObject_Call(meth, args, kw) : NULL;
    Py_XDECREF(args);
    Py_XDECREF(meth);
    Py_XDECREF(kw);
    int rc = finish(r, res, err, errlen);
    int kept = unwrap(lat) | unwrap(cond) | (out != Py_None ? unwrap(out) : (Py_DECREF(out), 0));
    if (!rc && kept) {
        snprintf(err, errlen, "call kept a reference to latents, cond or out: they are ppv's "
                 "buffers, valid during the call only (copy what you keep)");
        rc = -1;
    }
    leave();
    return rc;
}

/* The module's optional memory(setup, shape): a dict of weights,
 * kv_cache, buffers and working bytes (each optional, a non-negative int);
 * shape None, or a dict of frames, cached, cond_len and kind. Called where
 * no rank runs Python (after create, between calls, by --plan), in the
 * process's own thread state. */
static int py_memory(const module_slot *m, const ppv_generator_setup *s,
                     const ppv_generator_shape *call, ppv_generator_memory *out, char *err,
                     size_t errlen) {
    PyThreadState *was = PyThreadState_Swap(g_py.main);
    PyObject *setup = setup_dict(s), *shape;
    if (call)
        shape = Py_BuildValue("{s:i,s:i,s:i,s:s}", "frames", call->frames, "cached", call->cached,
                              "cond_len", call->cond_len, "kind",
                              call->kind == PPV_GENERATOR_CALL_REBUILD       ? "rebuild"
                              : call->kind == PPV_GENERATOR_CALL_CACHE_WRITE ? "cache_write"
                                                                             : "step");
    else
        shape = (Py_INCREF(Py_None), Py_None);
    PyObject *res = setup && shape ? PyObject_CallMethod(m->module, "memory", "OO", setup, shape)
                                   : NULL;
    int rc = 0;
    memset(out, 0, sizeof *out);
    if (!res) {
        exception_text(err, errlen);
        rc = -1;
    } else if (!PyDict_Check(res)) {
        snprintf(err, errlen, "memory returned %s, not a dict of weights, kv_cache, buffers and "
                 "working bytes", Py_TYPE(res)->tp_name);
        rc = -1;
    } else {
        static const char *const keys[] = {"weights", "kv_cache", "buffers", "working"};
        uint64_t *slots[] = {&out->weights, &out->kv_cache, &out->buffers, &out->working};
        PyObject *key, *value;
        Py_ssize_t pos = 0;
        while (!rc && PyDict_Next(res, &pos, &key, &value)) {
            const char *k = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
            int which = -1;
            for (int q = 0; k && q < 4; q++)
                if (!strcmp(k, keys[q])) which = q;
            long long v = which >= 0 && PyLong_Check(value) ? PyLong_AsLongLong(value) : -1;
            if (PyErr_Occurred()) PyErr_Clear();
            if (which < 0) {
                snprintf(err, errlen, "memory returned the key %s: only weights, kv_cache, "
                         "buffers and working are bytes ppv counts", k ? k : "(not a string)");
                rc = -1;
            } else if (v < 0) {
                snprintf(err, errlen, "memory: %s is not a non-negative int", keys[which]);
                rc = -1;
            } else
                *slots[which] = (uint64_t)v;
        }
    }
    Py_XDECREF(res);
    Py_XDECREF(shape);
    Py_XDECREF(setup);
    PyThreadState_Swap(was);
    return rc;
}

#define SLOT_MEMORY(i)                                                                             \
    static int py_memory_##i(const ppv_generator_setup *s, const ppv_generator_shape *call,       \
                             ppv_generator_memory *out, char *err, size_t errlen) {                \
        return py_memory(&g_py.slots[i], s, call, out, err, errlen);                               \
    }
SLOT_MEMORY(0) SLOT_MEMORY(1) SLOT_MEMORY(2) SLOT_MEMORY(3) SLOT_MEMORY(4) SLOT_MEMORY(5)
SLOT_MEMORY(6) SLOT_MEMORY(7)
#undef SLOT_MEMORY

static int (*const slot_memory[MAX_MODULES])(const ppv_generator_setup *,
                                             const ppv_generator_shape *, ppv_generator_memory *,
                                             char *, size_t) = {py_memory_0, py_memory_1,
                                                                py_memory_2, py_memory_3,
                                                                py_memory_4, py_memory_5,
                                                                py_memory_6, py_memory_7};

#define SLOT_CREATE(i)                                                                             \
    static int py_create_##i(const ppv_generator_setup *s, const ppv_generator_comm *comm,        \
                             void **state, char *err, size_t errlen) {                             \
        return py_create(&g_py.slots[i], s, comm, state, err, errlen);                             \
    }
SLOT_CREATE(0) SLOT_CREATE(1) SLOT_CREATE(2) SLOT_CREATE(3) SLOT_CREATE(4) SLOT_CREATE(5)
SLOT_CREATE(6) SLOT_CREATE(7)
#undef SLOT_CREATE

static int (*const slot_create[MAX_MODULES])(const ppv_generator_setup *,
                                             const ppv_generator_comm *, void **, char *,
                                             size_t) = {py_create_0, py_create_1, py_create_2,
                                                        py_create_3, py_create_4, py_create_5,
                                                        py_create_6, py_create_7};

/* The numpy C API (import_array returns from the function it is in). */
static int numpy_init(void) {
    import_array1(-1);
    return 0;
}

const ppv_generator *ppv_pygen_open(const char *path, char *err, size_t errlen);

const ppv_generator *ppv_pygen_open(const char *path, char *err, size_t errlen) {
    for (int k = 0; k < g_py.nslots; k++)
        if (!strcmp(g_py.slots[k].path, path)) return &g_py.slots[k].table;
    if (g_py.nslots == MAX_MODULES) {
        snprintf(err, errlen, "%s: a process loads at most %d Python generators", path,
                 MAX_MODULES);
        return NULL;
    }
    module_slot *slot = &g_py.slots[g_py.nslots];
    if (strlen(path) >= sizeof slot->path) {
        snprintf(err, errlen, "%s: the path is too long", path);
        return NULL;
    }
    if (!Py_IsInitialized()) {
        Py_InitializeEx(0); /* no signal handlers of Python's */
        g_py.main = PyThreadState_Get();
        g_py.interp = PyThreadState_GetInterpreter(g_py.main);
        if (numpy_init() < 0) {
            exception_text(err, errlen);
            return NULL;
        }
        if (!(g_py.comm_type = (PyTypeObject *)PyType_FromSpec(&comm_spec))) {
            exception_text(err, errlen);
            return NULL;
        }
    }
    /* importlib: the file as a module of its own name */
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)(strlen(base) - 3), base);
    PyObject *util = PyImport_ImportModule("importlib.util");
    PyObject *spec = util ? PyObject_CallMethod(util, "spec_from_file_location", "ss", name, path)
                          : NULL;
    PyObject *mod = spec && spec != Py_None
                        ? PyObject_CallMethod(util, "module_from_spec", "O", spec)
                        : NULL;
    PyObject *loader = mod ? PyObject_GetAttrString(spec, "loader") : NULL;
    PyObject *done = loader ? PyObject_CallMethod(loader, "exec_module", "O", mod) : NULL;
    if (!done) {
        if (PyErr_Occurred()) {
            char why[1024];
            exception_text(why, sizeof why);
            snprintf(err, errlen, "%s: cannot load the Python generator: %s", path, why);
        } else {
            snprintf(err, errlen, "%s: cannot load the Python generator", path);
        }
        Py_XDECREF(util), Py_XDECREF(spec), Py_XDECREF(mod), Py_XDECREF(loader);
        return NULL;
    }
    Py_DECREF(done), Py_DECREF(loader), Py_DECREF(spec), Py_DECREF(util);
    PyObject *n = PyObject_GetAttrString(mod, "NAME");
    PyObject *v = n ? PyObject_GetAttrString(mod, "VERSION") : NULL;
    PyObject *abi = v ? PyObject_GetAttrString(mod, "ABI") : NULL;
    PyObject *create = abi ? PyObject_GetAttrString(mod, "create") : NULL;
    const char *ns = n ? PyUnicode_AsUTF8(n) : NULL, *vs = v ? PyUnicode_AsUTF8(v) : NULL;
    long abiv = abi ? PyLong_AsLong(abi) : -1;
    if (!create || !ns || !vs || PyErr_Occurred() || !PyCallable_Check(create)) {
        PyErr_Clear();
        snprintf(err, errlen, "%s: a Python generator defines NAME and VERSION (strings), ABI (an "
                 "int) and create(setup, comm)", path);
        Py_XDECREF(n), Py_XDECREF(v), Py_XDECREF(abi), Py_XDECREF(create), Py_DECREF(mod);
        return NULL;
    }
    snprintf(slot->name, sizeof slot->name, "%s", ns);
    snprintf(slot->version, sizeof slot->version, "%s", vs);
    Py_DECREF(n), Py_DECREF(v), Py_DECREF(abi), Py_DECREF(create);
    /* optional: memory(setup, shape), read from ABI 3 on */
    PyObject *mem = abiv >= 3 ? PyObject_GetAttrString(mod, "memory") : NULL;
    int has_memory = mem && PyCallable_Check(mem);
    Py_XDECREF(mem);
    PyErr_Clear();
    /* optional: KV_FRAME_LOCAL = True declares PPV_GENERATOR_KV_FRAME_LOCAL */
    PyObject *local = PyObject_GetAttrString(mod, "KV_FRAME_LOCAL");
    int frame_local = local ? PyObject_IsTrue(local) : 0;
    Py_XDECREF(local);
    if (frame_local < 0) frame_local = 0;
    PyErr_Clear();
    PyObject *mesh = PyLong_FromLong(PPV_GENERATOR_GROUP_MESH);
    PyObject *world = PyLong_FromLong(PPV_GENERATOR_GROUP_WORLD);
    PyObject_SetAttrString(mod, "GROUP_MESH", mesh);
    PyObject_SetAttrString(mod, "GROUP_WORLD", world);
    Py_XDECREF(mesh), Py_XDECREF(world);
    slot->module = mod;
    snprintf(slot->path, sizeof slot->path, "%s", path);
    slot->table = (ppv_generator){
        .abi = (int32_t)abiv,
        .name = slot->name,
        .version = slot->version,
        .create = slot_create[g_py.nslots],
        .kv_reset = py_kv_reset,
        .kv_snapshot = py_kv_snapshot,
        .call = py_call,
        .destroy = py_destroy,
        .flags = frame_local ? PPV_GENERATOR_KV_FRAME_LOCAL : 0u,
        .memory = has_memory ? slot_memory[g_py.nslots] : NULL,
    };
    return &g_py.slots[g_py.nslots++].table;
}
