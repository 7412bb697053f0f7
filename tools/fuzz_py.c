/* fuzz_py.c - `ppv fuzz py FILE.py:FUNCTION -n RANKS`: a Python function
 * run on every rank of the mock world, as the explorer's program target
 * (cmd_fuzz.c parses the command line and prints the report).
 *
 * The Python ranks module (libppv_pyrank.so, fuzz/pyrank.c) is loaded
 * here, as the generator bridge is: ppv itself starts without libpython.
 * Ranks as processes (the default) share one bridge in shared memory,
 * made before the module forks its zygote and reset before every run;
 * ranks as threads (--ranks-as threads) get a fresh bridge a run. The
 * ranks of a run are waited for before the next run starts, and one that
 * outlives its run ends the exploration (its reason is the next run's
 * failure of the environment), never a hang. With --jobs J (ranks as
 * processes) each of the J workers has a target of its own: its zygote,
 * its own import of the file, and its bridge, and each target is kept on
 * one CPU of those ppv may use (its zygote, its ranks and the worker's
 * thread while it runs the target's runs): a run hands the turn from
 * process to process hundreds of times, and a hand-over to a process
 * asleep on another CPU costs that CPU's wake-up (on a VM, the host's):
 * measured here, two unpinned jobs made 1000 numpy runs in 11.3 s, two
 * pinned ones in 5.7 s.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "pyrank.h"

enum {
    /* ranks as processes: the most one call carries (its payload a rank,
     * shared memory taken only as it is touched) */
    PY_MESSAGE_BYTES = 256 << 20,
    /* the zygote's import of the file (torch's included) */
    PY_IMPORT_SECONDS = 300
};

struct py_target {
    const ppv_pyrank_module *mod;
    ppv_pyrank *py;
    int32_t n;
    double idle;
    ppv_ext *shared;   /* ranks as processes: their bridge, for every run */
    int started;       /* a run has been started on it */
    ppv_ext *x;        /* the run in progress, or the last one, until finished */
    char broken[1024]; /* why no more runs can be made ("" while they can) */
    int cpu;           /* --jobs above 1: the CPU its processes and runs keep to, else -1 */
    /* the first target: one a worker (jobs[0] is itself), their args */
    py_target **jobs;
    void **job_args;
    int32_t njobs;
};

static const ppv_pyrank_api bridge_api = {
    .begin = ppv_ext_begin,
    .send = ppv_ext_send,
    .recv = ppv_ext_recv,
    .broadcast = ppv_ext_broadcast,
    .allreduce_f32 = ppv_ext_allreduce_f32,
    .allgather = ppv_ext_allgather,
    .probe = ppv_ext_probe,
    .yield = ppv_ext_yield,
    .wait_any = ppv_ext_wait_any,
    .group_start = ppv_ext_group_start,
    .group_end = ppv_ext_group_end,
    .end = ppv_ext_end,
    .isend = ppv_ext_isend,
    .irecv = ppv_ext_irecv,
    .wait_op = ppv_ext_wait_op,
    .test_op = ppv_ext_test_op,
    .wait_some = ppv_ext_wait_some,
    .ended = ppv_ext_ended,
    .message_bytes = ppv_ext_message_bytes,
    .new_group = ppv_ext_new_group,
};

/* Waits for the last run's threads and frees its bridge. A thread that
 * does not end leaves the bridge closed (its calls fail) and unfreed. */
static void finish_run(py_target *t) {
    if (!t->x) return;
    char err[1024];
    double bound = t->idle > 1 ? t->idle : 1; /* an ending thread unwinds in milliseconds */
    if (t->mod->finish(t->py, bound, err, sizeof err) < 0) {
        ppv_ext_close(t->x);
        if (!t->broken[0]) snprintf(t->broken, sizeof t->broken, "%s", err);
    } else if (!t->shared) {
        ppv_ext_free(t->x);
    }
    t->x = NULL;
}

/* The program's hooks (ppv_fuzz_program). */
static int py_setup(void *arg, ppv_world *w, char *err, size_t errlen) {
    py_target *t = arg;
    if (t->n > PPV_PYRANK_GROUP_RANKS) return 0; /* new_group refuses: no communicators */
    /* a communicator for every set of ranks but the world (comm 0), in
     * the order of their masks, each numbered by its mask (pyrank.h) */
    for (int32_t m = 1; m < (1 << t->n) - 1; m++) {
        int32_t ranks[PPV_PYRANK_GROUP_RANKS], k = 0;
        for (int32_t r = 0; r < t->n; r++)
            if (m >> r & 1) ranks[k++] = r;
        int32_t c = ppv_world_add_comm(w, ranks, k);
        if (c != m) {
            snprintf(err, errlen, "the groups' communicators: got %d for set %d", (int)c, (int)m);
            return -1;
        }
    }
    return 0;
}

/* Keeps the calling thread (and what it forks) to cpu; -1: to every CPU
 * of set. */
static void keep_to(int cpu, const cpu_set_t *set) {
    cpu_set_t one;
    CPU_ZERO(&one);
    if (cpu >= 0) CPU_SET(cpu, &one);
    pthread_setaffinity_np(pthread_self(), sizeof one, cpu >= 0 ? &one : set);
}

static void py_reset(void *arg) {
    py_target *t = arg;
    if (t->cpu >= 0) keep_to(t->cpu, NULL); /* this worker's thread, for this target's run */
    finish_run(t);
    if (t->broken[0]) return;
    char err[1024];
    if (t->shared && t->started) ppv_ext_reset(t->shared); /* the last run's ranks are gone */
    t->started = 1;
    t->x = t->shared ? t->shared : ppv_ext_new(t->n, t->idle, err, sizeof err);
    if (!t->x) {
        snprintf(t->broken, sizeof t->broken, "%s", err);
        return;
    }
    if (t->mod->start(t->py, t->x, err, sizeof err) < 0) {
        snprintf(t->broken, sizeof t->broken, "%s", err);
        finish_run(t);
    }
}

static void py_main(ppv_transport *tr, int32_t rank, void *arg) {
    py_target *t = arg;
    if (!t->x) {
        ppv_world_fail_env(tr, rank, "%s", t->broken);
        return;
    }
    ppv_ext_rank_main(tr, rank, t->x);
}

/* Splits FILE.py:FUNCTION at its last ':' (file must end in .py); a bare
 * FILE.py is the script itself (FUNCTION "__main__"). */
static int split_spec(const char *spec, char *file, size_t fn, char *func, size_t un) {
    size_t len = strlen(spec);
    if (len > 3 && !strcmp(spec + len - 3, ".py") && len < fn) {
        snprintf(file, fn, "%s", spec);
        snprintf(func, un, "__main__");
        return 0;
    }
    const char *colon = strrchr(spec, ':');
    size_t flen = colon ? (size_t)(colon - spec) : 0;
    if (!colon || flen < 4 || strncmp(colon - 3, ".py", 3) != 0 || !colon[1] || flen >= fn ||
        strlen(colon + 1) >= un) {
        usage_error("py takes FILE.py:FUNCTION (a Python file and the function every rank "
                    "runs) or FILE.py (the script, run as __main__ on every rank), not '%s'",
                    spec);
        return -1;
    }
    memcpy(file, spec, flen);
    file[flen] = 0;
    snprintf(func, un, "%s", colon + 1);
    return 0;
}

/* The Python ranks module: $PPV_PYRANK_MODULE, where an installed ppv has
 * it (relative to the program's folder), where this build put it
 * (likewise), under the install prefix. */
static const ppv_pyrank_module *load_module(char *err, size_t errlen) {
#ifdef PPV_PYRANK_MODULE
    char why[1024];
    void *h = ppv_module_open("PPV_PYRANK_MODULE", PPV_PYRANK_MODULE_INSTALLED, PPV_PYRANK_MODULE,
                              PPV_PYRANK_MODULE_PREFIXED, NULL, RTLD_NOW | RTLD_GLOBAL, NULL, 0,
                              NULL, why, sizeof why);
    if (!h) {
        snprintf(err, errlen, "cannot load ppv's Python ranks module: %s", why);
        return NULL;
    }
    void *sym = dlsym(h, "ppv_pyrank_entry");
    if (!sym) {
        snprintf(err, errlen, "the Python ranks module has no ppv_pyrank_entry");
        return NULL;
    }
    const ppv_pyrank_module *(*entry)(void);
    memcpy(&entry, &sym, sizeof entry);
    const ppv_pyrank_module *m = entry();
    if (!m || m->abi != PPV_PYRANK_ABI) {
        snprintf(err, errlen, "the Python ranks module is of another ppv (interface %d, not %d)",
                 m ? m->abi : -1, PPV_PYRANK_ABI);
        return NULL;
    }
    return m;
#else
    snprintf(err, errlen, "this ppv was built without Python ranks (they need libpython3-dev: "
                          "install it and configure ppv again)");
    return NULL;
#endif
}

static py_target *open_one(const char *spec, int32_t nranks, double idle, int processes);

int py_target_open(const char *spec, int32_t nranks, double idle, int processes, int32_t jobs,
                   py_target **out, ppv_fuzz_program *pg) {
    *out = NULL;
    if (jobs < 1) jobs = 1;
    /* with more than one job, job j's zygote is forked while this thread
     * keeps to the j-th CPU it may use (mod their number): it and its
     * ranks keep to that one */
    cpu_set_t allowed;
    int cpus[CPU_SETSIZE], ncpu = 0;
    if (jobs > 1 && pthread_getaffinity_np(pthread_self(), sizeof allowed, &allowed) == 0)
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &allowed)) cpus[ncpu++] = c;
    int cpu = ncpu > 1 ? cpus[0] : -1;
    if (cpu >= 0) keep_to(cpu, NULL);
    py_target *t = open_one(spec, nranks, idle, processes);
    if (!t) {
        if (cpu >= 0) keep_to(-1, &allowed);
        return -1;
    }
    t->cpu = cpu;
    if (!(t->jobs = calloc((size_t)jobs, sizeof *t->jobs)) ||
        !(t->job_args = calloc((size_t)jobs, sizeof *t->job_args))) {
        fprintf(stderr, "ppv fuzz: out of memory\n");
        py_target_close(t);
        return -1;
    }
    t->jobs[0] = t;
    t->job_args[0] = t;
    t->njobs = 1;
    /* the other workers' targets: each its own zygote, importing the file
     * afresh (as a process of an mpirun campaign does) */
    for (; t->njobs < jobs; t->njobs++) {
        cpu = ncpu > 1 ? cpus[t->njobs % ncpu] : -1;
        if (cpu >= 0) keep_to(cpu, NULL);
        py_target *j = open_one(spec, nranks, idle, processes);
        if (!j) {
            if (cpu >= 0) keep_to(-1, &allowed);
            py_target_close(t);
            return -1;
        }
        j->cpu = cpu;
        t->jobs[t->njobs] = j;
        t->job_args[t->njobs] = j;
    }
    if (ncpu > 1) keep_to(-1, &allowed); /* each run keeps to its target's (py_reset) */
    memset(pg, 0, sizeof *pg);
    pg->nranks = nranks;
    pg->setup = py_setup;
    pg->reset = py_reset;
    pg->main = py_main;
    pg->arg = t;
    pg->job_args = jobs > 1 ? t->job_args : NULL;
    pg->njob_args = jobs > 1 ? jobs : 0;
    *out = t;
    return 0;
}

/* One target: the module loaded, the file imported; NULL after the
 * message. */
static py_target *open_one(const char *spec, int32_t nranks, double idle, int processes) {
    char file[4096], func[256], err[2048];
    if (split_spec(spec, file, sizeof file, func, sizeof func) < 0) return NULL;
    FILE *f = fopen(file, "r");
    if (!f) {
        fprintf(stderr, "ppv fuzz: %s: cannot read it\n", file);
        return NULL;
    }
    fclose(f);
    py_target *t = calloc(1, sizeof *t);
    if (!t) {
        fprintf(stderr, "ppv fuzz: out of memory\n");
        return NULL;
    }
    t->n = nranks;
    t->idle = idle;
    t->cpu = -1;
    if (!(t->mod = load_module(err, sizeof err))) {
        fprintf(stderr, "ppv fuzz: %s\n", err);
        free(t);
        return NULL;
    }
    /* the ppv package for `import ppv.dist`: where it was installed beside
     * this ppv, else this build's source tree (both relative to the
     * program's folder) */
    const char *pkg = getenv("PPV_PYTHON_DIR");
    char installed[4096], source[4096], probe[4200];
    ppv_path_beside_program(PPV_PYTHON_DIR_INSTALLED, installed, sizeof installed);
    ppv_path_beside_program(PPV_PYTHON_DIR, source, sizeof source);
    snprintf(probe, sizeof probe, "%s/ppv/dist.py", installed);
    if (!pkg || !*pkg) pkg = access(probe, F_OK) == 0 ? installed : source;
    if (processes &&
        !(t->shared = ppv_ext_new_shared(nranks, idle, PY_MESSAGE_BYTES, err, sizeof err))) {
        fprintf(stderr, "ppv fuzz: %s\n", err);
        free(t);
        return NULL;
    }
    if (!(t->py = t->mod->open(file, func, nranks, &bridge_api, pkg, t->shared, PY_IMPORT_SECONDS,
                               err, sizeof err))) {
        fprintf(stderr, "ppv fuzz: %s\n", err);
        ppv_ext_free(t->shared);
        free(t);
        return NULL;
    }
    return t;
}

void py_target_close(py_target *t) {
    if (!t) return;
    for (int32_t j = 1; j < t->njobs; j++) py_target_close(t->jobs[j]);
    free(t->jobs);
    free(t->job_args);
    finish_run(t);
    if (t->broken[0]) /* the runs stopped there: say why, whatever was reported */
        fprintf(stderr, "ppv fuzz: warning: %s; no run was made after that\n", t->broken);
    t->mod->close(t->py);
    ppv_ext_free(t->shared);
    free(t);
}

int py_target_run(py_target *t, const ppv_fuzz_program *pg, const ppv_policy *pol,
                  const ppv_fault *fault, ppv_world **out, ppv_world_result *res) {
    *out = NULL;
    memset(res, 0, sizeof *res);
    char err[1024];
    ppv_world_options wo;
    memset(&wo, 0, sizeof wo);
    wo.nranks = t->n;
    wo.sem = pg->sem;
    wo.policy = *pol;
    wo.fault = *fault;
    wo.watchdog_steps = pg->watchdog_steps > 0 ? pg->watchdog_steps : 100000;
    wo.stack_bytes = 256 * 1024;
    ppv_world *w = ppv_world_new(&wo, err, sizeof err);
    if (!w || py_setup(t, w, err, sizeof err) < 0) {
        fprintf(stderr, "ppv fuzz: %s\n", err);
        ppv_world_free(w);
        return -1;
    }
    py_reset(t);
    if (ppv_world_run(w, py_main, t, res) < 0) {
        fprintf(stderr, "ppv fuzz: %s\n", res->message);
        ppv_world_free(w);
        return -1;
    }
    finish_run(t);
    if (res->env_error || t->broken[0]) {
        fprintf(stderr, "ppv fuzz: the run could not be carried out: %s\n",
                t->broken[0] ? t->broken : res->message);
        ppv_world_free(w);
        return -1;
    }
    *out = w;
    return 0;
}

int py_target_replay(py_target *t, const ppv_fuzz_program *pg, const char *trace, int json) {
    replay_trace rt;
    memset(&rt, 0, sizeof rt);
    ppv_policy pol;
    memset(&pol, 0, sizeof pol);
    ppv_fault fault;
    int32_t tranks = 0;
    if (replay_trace_read(trace, INT64_C(1) << 40, &rt, &pol, &fault, &tranks) < 0) {
        replay_trace_free(&rt);
        return PPV_EXIT_BAD_INPUT;
    }
    if (tranks != t->n) {
        fprintf(stderr, "ppv fuzz: %s was taken on %d ranks, not -n %d\n", trace, (int)tranks,
                (int)t->n);
        replay_trace_free(&rt);
        return PPV_EXIT_BAD_INPUT;
    }
    ppv_world *w;
    ppv_world_result res;
    if (py_target_run(t, pg, &pol, &fault, &w, &res) < 0) {
        ppv_world_result_free(&res);
        replay_trace_free(&rt);
        return PPV_EXIT_BAD_INPUT;
    }
    static const char *const ends[] = {"every rank returned", "deadlock", "hang (the watchdog)",
                                       "failed", "pruned"};
    replay_judgement j;
    memset(&j, 0, sizeof j);
    j.diverged = res.diverged;
    j.judged = rt.verdict.present;
    j.passes = res.status == PPV_RUN_DONE;
    snprintf(j.why, sizeof j.why, "%s", res.message);
    int rc = res.status == PPV_RUN_DONE && !res.diverged ? PPV_EXIT_OK : PPV_EXIT_PROBLEM;
    if (json) { /* as ppv pp --replay --json reports its replay */
        json_object *o = json_object_new_object(), *bl = json_object_new_array();
        json_object_object_add(o, "ok", json_object_new_boolean(rc == PPV_EXIT_OK));
        json_object_object_add(o, "target", json_object_new_string("py"));
        json_object_object_add(o, "trace", json_object_new_string(trace));
        json_object_object_add(o, "end", json_object_new_string(ends[res.status]));
        json_object_object_add(o, "scheduler_steps", json_object_new_int64(res.steps));
        json_object_object_add(o, "message", res.message[0] ? json_object_new_string(res.message)
                                                            : NULL);
        for (int32_t k = 0; k < res.nblocked; k++)
            json_object_array_add(bl, wait_json(&res.blocked[k]));
        json_object_object_add(o, "blocked", bl);
        json_object_object_add(o, "replay", replay_json(&j, &rt.verdict));
        puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
                                                   JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
    } else {
        printf("ppv fuzz: py replay of %s: %s in %lld scheduler steps\n", trace, ends[res.status],
               (long long)res.steps);
        if (res.status != PPV_RUN_DONE && res.message[0]) printf("  %s\n", res.message);
        for (int32_t k = 0; k < res.nblocked; k++)
            printf("  rank %d blocked at %s: %s\n", (int)res.blocked[k].rank,
                   res.blocked[k].action, res.blocked[k].reason);
        if (res.ncycle) {
            printf("  cycle:");
            for (int32_t k = 0; k < res.ncycle; k++) printf(" rank %d ->", (int)res.cycle[k].rank);
            printf(" rank %d\n", (int)res.cycle[0].rank);
        }
        if (!print_replay(&j, &rt.verdict, res.message))
            printf("result: %s\n", res.status == PPV_RUN_DONE ? "OK" : "PROBLEM");
    }
    ppv_world_result_free(&res);
    ppv_world_free(w);
    replay_trace_free(&rt);
    return rc;
}
