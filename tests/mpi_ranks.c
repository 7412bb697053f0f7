/* mpi_ranks.c - the MPI transport's own logic, scenario by scenario, one
 * process per rank (test_mpi runs it under mpirun):
 *
 *   mpi_ranks SCENARIO SEMANTICS TIMEOUT [mpi|nccl]
 *                                            under mpirun, on that transport
 *   mpi_ranks --mock SCENARIO NRANKS         the same rank code on the mock
 *
 * Rank 0 (the mock: the run) prints what the scenario computed, so the two
 * transports' bits can be compared; a scenario that must fail ends the job
 * through the transport's report. Exit 0, or the transport's status.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ppv_engine.h"

typedef struct scenario_out {
    unsigned char bytes[256];
    size_t n;
} scenario_out;

/* Values whose float sum depends on the order they are added in: over 4
 * ranks, member order gives 1e8 + 1 - 1e8 + 1 = 1 where the reverse, or
 * pairs first, gives 0 (1 is below half an ulp of 1e8). */
static float value(int32_t rank, int i) {
    static const float v[] = {1e8f, 1.0f, -1e8f, 1.0f};
    return v[(rank + i) % 4] * (float)(1 + i);
}

static void sc_collectives(ppv_transport *t, int32_t rank, void *arg) {
    scenario_out *o = arg;
    float sum[6];
    for (int i = 0; i < 6; i++)
        sum[i] = value(rank, i);
    t->ops->allreduce_f32(t->impl, rank, sum, 6, 0, "ALLREDUCE");
    uint64_t word = rank == 1 ? 0x1122334455667788ULL : 0;
    t->ops->broadcast(t->impl, rank, &word, sizeof word, 1, 0, "BCAST");
    int32_t mine = 100 + rank * rank, all[16] = {0};
    t->ops->allgather(t->impl, rank, &mine, all, sizeof mine, 0, "ALLGATHER");
    if (rank == 0) {
        memcpy(o->bytes, sum, sizeof sum);
        memcpy(o->bytes + sizeof sum, &word, sizeof word);
        memcpy(o->bytes + sizeof sum + sizeof word, all, sizeof all);
        o->n = sizeof sum + sizeof word + sizeof all;
    }
}

/* Ranks 0 and 1 each send 64 bytes to the other, then receive: a deadlock
 * unless the sends are buffered (or grouped). */
static void exchange(ppv_transport *t, int32_t rank, scenario_out *o, int grouped) {
    unsigned char out[64], in[64];
    for (int i = 0; i < 64; i++)
        out[i] = (unsigned char)(rank * 64 + i);
    int32_t peer = 1 - rank;
    if (grouped) t->ops->group_start(t->impl, rank);
    t->ops->send(t->impl, rank, out, sizeof out, peer, 0, rank ? "1SEND_X" : "0SEND_X");
    t->ops->recv(t->impl, rank, in, sizeof in, peer, 0, rank ? "1RECV_X" : "0RECV_X");
    if (grouped) t->ops->group_end(t->impl, rank);
    if (rank == 0) {
        memcpy(o->bytes, in, sizeof in);
        o->n = sizeof in;
    }
}

static void sc_exchange(ppv_transport *t, int32_t rank, void *arg) {
    exchange(t, rank, arg, 0);
}

static void sc_exchange_grouped(ppv_transport *t, int32_t rank, void *arg) {
    exchange(t, rank, arg, 1);
}

static void sc_size_mismatch(ppv_transport *t, int32_t rank, void *arg) {
    (void)arg;
    char buf[16] = {0};
    if (rank == 0) t->ops->send(t->impl, rank, buf, 8, 1, 0, "0SEND_F0");
    if (rank == 1) t->ops->recv(t->impl, rank, buf, 16, 0, 0, "1RECV_F0");
}

static void sc_collective_mismatch(ppv_transport *t, int32_t rank, void *arg) {
    (void)arg;
    uint64_t word = 0;
    t->ops->broadcast(t->impl, rank, &word, sizeof word, rank == 0 ? 0 : 1, 0, "BCAST");
}

static void sc_tripwire(ppv_transport *t, int32_t rank, void *arg) {
    (void)arg;
    if (rank == 1) ppv_world_fail(t, rank, "tripwire: chunk 3 came after chunk 4");
}

static void sc_env_failure(ppv_transport *t, int32_t rank, void *arg) {
    (void)arg;
    if (rank == 1) ppv_world_fail_env(t, rank, "out of memory holding chunk 3");
}

/* Rank 1 polls for a message rank 0 never sends. */
static void sc_poll(ppv_transport *t, int32_t rank, void *arg) {
    (void)arg;
    if (rank != 1) return;
    int arrived = 0;
    while (!arrived) {
        t->ops->probe(t->impl, rank, 0, 0, &arrived);
        ppv_world_yield(t, rank);
    }
}

/* Rank 0 broadcasts; rank 1 never joins it. */
static void sc_lonely_collective(ppv_transport *t, int32_t rank, void *arg) {
    (void)arg;
    uint64_t word = 0;
    if (rank == 0) t->ops->broadcast(t->impl, rank, &word, sizeof word, 0, 0, "BCAST");
}

static void sc_nested_group(ppv_transport *t, int32_t rank, void *arg) {
    (void)arg;
    t->ops->group_start(t->impl, rank);
    t->ops->group_start(t->impl, rank);
}

static void sc_bad_peer(ppv_transport *t, int32_t rank, void *arg) {
    (void)arg;
    char b = 0;
    if (rank == 0) t->ops->send(t->impl, rank, &b, 1, 5, 0, "0SEND_F0");
}

/* Rank 0 sends 64 bytes to itself and receives them, in one group (NCCL
 * allows it; the one-GPU benchmark relies on it) or not (refused). */
static void self_exchange(ppv_transport *t, int32_t rank, scenario_out *o, int grouped) {
    if (rank != 0) return;
    unsigned char out[64], in[64];
    for (int i = 0; i < 64; i++)
        out[i] = (unsigned char)(0xc0 ^ i);
    memset(in, 0, sizeof in);
    if (grouped) t->ops->group_start(t->impl, rank);
    t->ops->send(t->impl, rank, out, sizeof out, 0, 0, "0SEND_SELF");
    t->ops->recv(t->impl, rank, in, sizeof in, 0, 0, "0RECV_SELF");
    if (grouped) t->ops->group_end(t->impl, rank);
    memcpy(o->bytes, in, sizeof in);
    o->n = sizeof in;
}

static void sc_self_grouped(ppv_transport *t, int32_t rank, void *arg) {
    self_exchange(t, rank, arg, 1);
}

static void sc_self_ungrouped(ppv_transport *t, int32_t rank, void *arg) {
    self_exchange(t, rank, arg, 0);
}

/* Rank 0 sends 8 bytes that rank 1 never receives: the run must not end
 * well, however the send was buffered. */
static void sc_unreceived(ppv_transport *t, int32_t rank, void *arg) {
    (void)arg;
    uint64_t word = 7;
    if (rank == 0) t->ops->send(t->impl, rank, &word, sizeof word, 1, 0, "0SEND_LOST");
}

/* Rank 0 sends 8, 64 and 8 bytes to rank 1, which takes them in that
 * order (under eager:32 the first and last are buffered, the middle one
 * waits) and sends them back: every message arrives whole and in its
 * place. */
static void sc_mixed_sizes(ppv_transport *t, int32_t rank, void *arg) {
    scenario_out *o = arg;
    static const size_t len[3] = {8, 64, 8};
    unsigned char m[3][64];
    size_t at = 0;
    for (int k = 0; k < 3; k++) {
        for (size_t i = 0; i < len[k]; i++)
            m[k][i] = (unsigned char)(16 * k + (int)i);
        if (rank == 0) t->ops->send(t->impl, rank, m[k], len[k], 1, 0, "0SEND_MIXED");
    }
    for (int k = 0; k < 3; k++) {
        if (rank == 1) {
            memset(m[k], 0, sizeof m[k]);
            t->ops->recv(t->impl, rank, m[k], len[k], 0, 0, "1RECV_MIXED");
        }
    }
    for (int k = 0; k < 3; k++) {
        if (rank == 1) t->ops->send(t->impl, rank, m[k], len[k], 0, 0, "1SEND_BACK");
        if (rank == 0) t->ops->recv(t->impl, rank, o->bytes + at, len[k], 1, 0, "0RECV_BACK");
        at += len[k];
    }
    if (rank == 0) o->n = at;
}

static const struct {
    const char *name;
    ppv_rank_main fn;
} scenarios[] = {
    {"unreceived", sc_unreceived},
    {"mixed-sizes", sc_mixed_sizes},
    {"collectives", sc_collectives},
    {"exchange", sc_exchange},
    {"exchange-grouped", sc_exchange_grouped},
    {"size-mismatch", sc_size_mismatch},
    {"collective-mismatch", sc_collective_mismatch},
    {"tripwire", sc_tripwire},
    {"env-failure", sc_env_failure},
    {"poll", sc_poll},
    {"nested-group", sc_nested_group},
    {"lonely-collective", sc_lonely_collective},
    {"bad-peer", sc_bad_peer},
    {"self-grouped", sc_self_grouped},
    {"self-ungrouped", sc_self_ungrouped},
};

static ppv_rank_main find(const char *name) {
    for (size_t k = 0; k < sizeof scenarios / sizeof scenarios[0]; k++)
        if (strcmp(scenarios[k].name, name) == 0) return scenarios[k].fn;
    fprintf(stderr, "mpi_ranks: no scenario '%s'\n", name);
    exit(2);
}

static void print_out(const scenario_out *o) {
    for (size_t i = 0; i < o->n; i++)
        printf("%02x", o->bytes[i]);
    printf("\n");
}

/* --refusals: on processes the engine refuses what only the mock can do
 * (a policy for ppv_run, an injection for ppv_pp_run), before any message;
 * rank 0 prints both reasons. */
static int refusals(void) {
    char err[512], err2[512];
    ppv_proc *p = NULL;
    if (ppv_proc_start("mpi", &p, err, sizeof err) < 0) {
        fprintf(stderr, "mpi_ranks: %s\n", err);
        return 2;
    }
    ppv_gen_params gp = {ppv_proc_size(p), 4, 0};
    ppv_schedule *s = NULL;
    if (ppv_generate("1f1b", &gp, &s, err, sizeof err) < 0) return 2;
    ppv_run_options o = ppv_run_defaults();
    o.proc = p;
    o.policy.kind = PPV_POLICY_RANDOM;
    ppv_run_report *rep = NULL;
    int rc = ppv_run(s, &o, &rep, err, sizeof err);
    ppv_run_report_free(rep);
    ppv_schedule_free(s);
    ppv_pp_options po = ppv_pp_defaults();
    po.mesh = ppv_proc_size(p) - 1;
    po.proc = p;
    po.inject = (ppv_pp_inject)ppv_pp_inject_lookup("OM-03");
    ppv_pp_report *pr = NULL;
    int rc2 = ppv_pp_run(&po, &pr, err2, sizeof err2);
    ppv_pp_report_free(pr);
    if (ppv_proc_rank(p) == 0) printf("run %d: %s\npp %d: %s\n", rc, err, rc2, err2);
    ppv_proc_end(p);
    return 0;
}

int main(int argc, char **argv) {
    char err[512];
    scenario_out out;
    memset(&out, 0, sizeof out);
    if (argc == 2 && strcmp(argv[1], "--refusals") == 0) return refusals();
    if (argc == 4 && strcmp(argv[1], "--mock") == 0) {
        ppv_world_options wo;
        memset(&wo, 0, sizeof wo);
        wo.nranks = atoi(argv[3]);
        wo.sem.kind = PPV_SEM_RENDEZVOUS;
        wo.policy.kind = PPV_POLICY_RR;
        wo.watchdog_steps = 10000;
        ppv_world *w = ppv_world_new(&wo, err, sizeof err);
        ppv_world_result res;
        if (!w || ppv_world_run(w, find(argv[2]), &out, &res) < 0) {
            fprintf(stderr, "mpi_ranks: %s\n", w ? res.message : err);
            return 2;
        }
        int ok = res.status == PPV_RUN_DONE;
        if (!ok) fprintf(stderr, "mpi_ranks: %s\n", res.message);
        ppv_world_result_free(&res);
        ppv_world_free(w);
        print_out(&out);
        return ok ? 0 : 1;
    }
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: mpi_ranks SCENARIO SEMANTICS TIMEOUT [mpi|nccl] | --mock SCENARIO "
                        "NRANKS\n");
        return 2;
    }
    /* start-only: the transport starts and ends, nothing between (its
     * bootstrap alone) */
    int start_only = strcmp(argv[1], "start-only") == 0;
    ppv_rank_main fn = start_only ? NULL : find(argv[1]);
    ppv_proc *p = NULL;
    if (ppv_proc_start(argc == 5 ? argv[4] : "mpi", &p, err, sizeof err) < 0) {
        fprintf(stderr, "mpi_ranks: %s\n", err);
        return 2;
    }
    int32_t me = ppv_proc_rank(p);
    ppv_proc_config cfg;
    memset(&cfg, 0, sizeof cfg);
    if (ppv_semantics_parse(argv[2], &cfg.sem) < 0) return 2;
    /* rank 0 waits three times as long, so that rank 1's report comes first */
    cfg.timeout_s = atof(argv[3]) * (me == 0 ? 3 : 1);
    ppv_transport t;
    if (ppv_proc_configure(p, &cfg, &t, err, sizeof err) < 0) {
        fprintf(stderr, "mpi_ranks: %s\n", err);
        return 2;
    }
    if (start_only) {
        printf("rank %d of %d started\n", me, ppv_proc_size(p));
        ppv_proc_end(p);
        return 0;
    }
    fn(&t, me, &out);
    ppv_proc_settle(p);
    if (me == 0) print_out(&out);
    ppv_proc_end(p);
    return 0;
}
