/* walk.c - a file's objects listed for diff and replay alike: every object
 * reachable from the root by hard links, each once, by its first path in
 * name order (H5Ovisit's rule). Files come from other systems, so each
 * object is checked before its links are read, the links are read in
 * HDF5's native order (HDF5 1.10 frees uninitialised memory when a
 * corrupted link heap stops a walk in name order part-way, and a name
 * index that no lookup needs does not stop this one), and a corrupted
 * file is an error that names it and the object. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "golden_internal.h"

/* How deep a group may lie (the groups above it; the root's members lie
 * 1 deep): a ppv file's lie 2 deep at most, and a walk deeper than this
 * is most likely in a corrupted file, and must not exhaust the stack. */
enum { MAX_DEPTH = 255 };

/* One link of a group, as H5Literate gives it. */
typedef struct member {
    char *name;
    int hard;
} member;

typedef struct members {
    member *v;
    size_t n, cap;
    int oom;
} members;

/* The addresses of the objects a walk has reached (an open-addressing
 * set; 0 marks a free slot: the superblock lies there, never an object,
 * and the depth bound ends any walk all the same). */
typedef struct seen {
    haddr_t *v;
    size_t n, cap; /* cap: a power of two, or 0 */
} seen;

/* A walk of one file: the objects it lists, where an error is told. */
typedef struct walk {
    const char *file;
    h5_objlist *l;
    seen s;
    char *err;
    size_t errlen;
} walk;

/* Adds addr to s: 1 if it is new, 0 if it was there, -1 out of memory. */
static int seen_add(seen *s, haddr_t addr) {
    if (2 * (s->n + 1) > s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 256;
        haddr_t *nv = calloc(cap, sizeof *nv);
        if (!nv) return -1;
        for (size_t k = 0; k < s->cap; k++)
            for (size_t at = s->v[k] % cap; s->v[k]; at = (at + 1) % cap)
                if (!nv[at]) {
                    nv[at] = s->v[k];
                    break;
                }
        free(s->v);
        s->v = nv;
        s->cap = cap;
    }
    size_t at = addr % s->cap;
    for (; s->v[at]; at = (at + 1) % s->cap)
        if (s->v[at] == addr) return 0;
    s->v[at] = addr;
    s->n++;
    return 1;
}

/* Appends (path, type) to l, taking path; -1 out of memory (path freed). */
static int objlist_add(h5_objlist *l, char *path, H5O_type_t type) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        h5_obj *nv = realloc(l->v, cap * sizeof *nv);
        if (!nv) return free(path), -1;
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = (h5_obj){path, type};
    return 0;
}

/* H5Literate's callback: collects the group's links (no HDF5 call). */
static herr_t collect_link(hid_t g, const char *name, const H5L_info_t *info, void *arg) {
    (void)g;
    members *ls = arg;
    if (ls->n == ls->cap) {
        size_t cap = ls->cap ? 2 * ls->cap : 16;
        member *nv = realloc(ls->v, cap * sizeof *nv);
        if (!nv) return ls->oom = 1, -1;
        ls->v = nv;
        ls->cap = cap;
    }
    if (!(ls->v[ls->n].name = strdup(name))) return ls->oom = 1, -1;
    ls->v[ls->n++].hard = info->type == H5L_TYPE_HARD;
    return 0;
}

/* qsort's order of members: by name, as bytes (HDF5's name order). */
static int by_member_name(const void *a, const void *b) {
    return strcmp(((const member *)a)->name, ((const member *)b)->name);
}

/* Frees the names and the list. */
static void members_free(members *ls) {
    for (size_t k = 0; k < ls->n; k++)
        free(ls->v[k].name);
    free(ls->v);
}

/* "/a" + "b" -> "/a/b" (malloc'd; NULL out of memory). */
static char *child_path(const char *parent, const char *name) {
    size_t n = strlen(parent), m = strlen(name);
    char *p = malloc(n + m + 2);
    if (p) snprintf(p, n + m + 2, "%s%s%s", parent, strcmp(parent, "/") ? "/" : "", name);
    return p;
}

static int walk_group(walk *w, hid_t parent, const char *name, const char *path, int depth);

/* H5Aiterate's callback: opens the attribute and reads its type and
 * shape, so a corrupted attribute (a message, or the heap of a dense
 * store) fails here, once, for every reader alike. */
static herr_t check_attribute(hid_t obj, const char *name, const H5A_info_t *info, void *arg) {
    (void)info;
    (void)arg;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    hid_t t = a < 0 ? -1 : H5Aget_type(a), sp = a < 0 ? -1 : H5Aget_space(a);
    int bad = a < 0 || t < 0 || sp < 0 || H5Sget_simple_extent_npoints(sp) < 0;
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    if (a >= 0) H5Aclose(a);
    return bad ? -1 : 0;
}

/* What a walk needs of the object at link name of g: its type, its
 * address and how many attributes it has. HDF5 1.12 replaced the address
 * by a token (H5O_info2_t); under the native file driver the token is
 * the address, which H5VLnative_token_to_addr gives back, and moved the
 * header's own facts (read with H5O_INFO_ALL before) to
 * H5Oget_native_info_by_name: asked for too, so the header is read as
 * fully under both. 0, or -1. */
typedef struct object_info {
    H5O_type_t type;
    haddr_t addr;
    hsize_t num_attrs;
} object_info;

static int get_object_info(hid_t g, const char *name, unsigned fields, object_info *out) {
#if H5_VERSION_GE(1, 12, 0)
    H5O_info2_t oi;
    H5O_native_info_t ni;
    if (H5Oget_info_by_name3(g, name, &oi, fields, H5P_DEFAULT) < 0 ||
        H5VLnative_token_to_addr(g, oi.token, &out->addr) < 0 ||
        (fields == H5O_INFO_ALL &&
         H5Oget_native_info_by_name(g, name, &ni, H5O_NATIVE_INFO_ALL, H5P_DEFAULT) < 0))
        return -1;
#else
    H5O_info_t oi;
    if (H5Oget_info_by_name2(g, name, &oi, fields, H5P_DEFAULT) < 0) return -1;
    out->addr = oi.addr;
#endif
    out->type = oi.type;
    out->num_attrs = oi.num_attrs;
    return 0;
}

/* The whole header of the object at link name of g, as h5dump reads it:
 * every message and continuation chunk (their checksums), the attribute
 * count, and each attribute. 0, or -1 with the reason. */
static int check_header(walk *w, hid_t g, const char *name, const char *path) {
    object_info oi;
    if (get_object_info(g, name, H5O_INFO_ALL, &oi) < 0)
        return gerr(w->err, w->errlen, "%s: corrupted file: cannot read the header of %s",
                    w->file, path);
    hid_t o = H5Oopen(g, name, H5P_DEFAULT);
    int bad = o < 0 ||
              (oi.num_attrs > 0 &&
               H5Aiterate2(o, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, check_attribute, NULL) < 0);
    if (o >= 0) H5Oclose(o);
    if (bad)
        return gerr(w->err, w->errlen, "%s: corrupted file: cannot read the attributes of %s",
                    w->file, path);
    return 0;
}

/* Checks the object that link name of group g leads to and lists it as
 * path (malloc'd, taken), then, for a group, its members: its header
 * must read as a group, dataset or named datatype, and it must not have
 * been reached before (H5Ovisit's rule: each object once, by its first
 * path in name order; a hard link up the tree ends there). 0, or -1 with
 * the reason in w->err. */
static int walk_object(walk *w, hid_t g, const char *name, char *path, int depth) {
    object_info oi;
    int fresh;
    if (get_object_info(g, name, H5O_INFO_BASIC, &oi) < 0 ||
        (oi.type != H5O_TYPE_GROUP && oi.type != H5O_TYPE_DATASET &&
         oi.type != H5O_TYPE_NAMED_DATATYPE)) {
        gerr(w->err, w->errlen, "%s: corrupted file: cannot read the object %s", w->file, path);
        free(path);
        return -1;
    }
    if ((fresh = seen_add(&w->s, oi.addr)) <= 0) {
        free(path);
        return fresh < 0 ? gerr(w->err, w->errlen, "out of memory") : 0;
    }
    if (check_header(w, g, name, path) < 0) {
        free(path);
        return -1;
    }
    if (objlist_add(w->l, path, oi.type) < 0) return gerr(w->err, w->errlen, "out of memory");
    return oi.type == H5O_TYPE_GROUP ? walk_group(w, g, name, path, depth) : 0;
}

/* Lists the members of the group that link name of parent leads to (at
 * path, depth groups deep), in name order, and below them. The links
 * are read in HDF5's native order, which walks the group's index without
 * building the sorted table of links that HDF5 1.10 frees uninitialised
 * when a corrupted link heap stops it part-way. */
static int walk_group(walk *w, hid_t parent, const char *name, const char *path, int depth) {
    if (depth > MAX_DEPTH)
        return gerr(w->err, w->errlen,
                    "%s: corrupted file? the group %s is %d groups deep, more than the %d ppv "
                    "reads",
                    w->file, path, depth, MAX_DEPTH);
    members ls = {0};
    hid_t g = H5Gopen2(parent, name, H5P_DEFAULT);
    int rc = 0;
    if (g < 0 || H5Literate(g, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, collect_link, &ls) < 0)
        rc = ls.oom
                 ? gerr(w->err, w->errlen, "out of memory")
                 : gerr(w->err, w->errlen,
                        "%s: corrupted file: cannot read the links of the group %s", w->file, path);
    if (ls.n) qsort(ls.v, ls.n, sizeof *ls.v, by_member_name); /* ls.v may be NULL */
    for (size_t k = 0; rc == 0 && k < ls.n; k++) {
        if (!ls.v[k].hard) continue; /* soft and external links are not followed */
        char *sub = child_path(path, ls.v[k].name);
        rc = sub ? walk_object(w, g, ls.v[k].name, sub, depth + 1)
                 : gerr(w->err, w->errlen, "out of memory");
    }
    members_free(&ls);
    if (g >= 0) H5Gclose(g);
    return rc;
}

int h5_list_objects(hid_t f, const char *file, h5_objlist *l, char *err, size_t errlen) {
    walk w = {file, l, {0}, err, errlen};
    char *root = strdup("/");
    int rc = root ? walk_object(&w, f, ".", root, 0) : gerr(err, errlen, "out of memory");
    free(w.s.v);
    return rc;
}

hid_t h5_open_checked(const char *path, char *err, size_t errlen) {
    if (access(path, R_OK) != 0)
        return gerr(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    if (H5Fis_hdf5(path) <= 0) return gerr(err, errlen, "%s: not an HDF5 file", path);
    hid_t f = h5_open_read(path);
    if (f < 0) return gerr(err, errlen, "%s: cannot open as HDF5 (truncated or corrupted?)", path);
    h5_objlist l = {0};
    int rc = h5_list_objects(f, path, &l, err, errlen);
    h5_objlist_free(&l);
    if (rc < 0) {
        H5Fclose(f);
        return -1;
    }
    return f;
}

void h5_objlist_free(h5_objlist *l) {
    for (size_t k = 0; k < l->n; k++)
        free(l->v[k].path);
    free(l->v);
}

