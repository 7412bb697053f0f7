/* bench_mpi.c - the MPI transport's cost, under mpirun:
 *
 *   mpirun -np 2 ppv_bench_mpi [ROUNDS]        (add --oversubscribe as needed)
 *
 * 1. Ping-pong between ranks 0 and 1 at 1 KiB to 4 MiB: raw MPI_Send and
 *    MPI_Recv against the transport's send and recv (the module's calls,
 *    with their polling watchdog), under rendezvous (MPI_Issend) and eager
 *    (a copy sent with MPI_Isend); best of 5 batches of ROUNDS round trips each, alternated
 *    so that both sides see the same machine.
 * 2. One `ppv run` training step of 1F1B on as many ranks as the job has
 *    processes, on the transport, against the same step on the mock in
 *    rank 0 alone (best of 3 each).
 * A benchmark reports figures; it never fails on them (exit 2 only when it
 * cannot run).
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "ppv_engine.h"

/* Seconds per round trip, best of 5 batches. */
static double raw_pingpong(int me, char *buf, int bytes, int rounds) {
    double best = 1e30;
    for (int b = 0; b < 5; b++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < rounds; i++) {
            if (me == 0) {
                MPI_Send(buf, bytes, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
                MPI_Recv(buf, bytes, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (me == 1) {
                MPI_Recv(buf, bytes, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, bytes, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
            }
        }
        double dt = (MPI_Wtime() - t0) / rounds;
        if (dt < best) best = dt;
    }
    return best;
}

static double ppv_pingpong(ppv_transport *t, int me, char *buf, size_t bytes, int rounds) {
    double best = 1e30;
    for (int b = 0; b < 5; b++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < rounds; i++) {
            if (me == 0) {
                t->ops->send(t->impl, me, buf, bytes, 1, 0, "ping");
                t->ops->recv(t->impl, me, buf, bytes, 1, 0, "pong");
            } else if (me == 1) {
                t->ops->recv(t->impl, me, buf, bytes, 0, 0, "ping");
                t->ops->send(t->impl, me, buf, bytes, 0, 0, "pong");
            }
        }
        double dt = (MPI_Wtime() - t0) / rounds;
        if (dt < best) best = dt;
    }
    return best;
}

static int configure(ppv_proc *p, const char *sem, ppv_transport *t) {
    ppv_proc_config cfg;
    memset(&cfg, 0, sizeof cfg);
    ppv_semantics_parse(sem, &cfg.sem);
    cfg.timeout_s = 600;
    char err[256];
    if (ppv_proc_configure(p, &cfg, t, err, sizeof err) < 0) {
        fprintf(stderr, "ppv_bench_mpi: %s\n", err);
        return -1;
    }
    return 0;
}

/* Best of 3 wall seconds of one training step of s on o. */
static double step_time(const ppv_schedule *s, const ppv_run_options *o) {
    double best = 1e30;
    for (int k = 0; k < 3; k++) {
        ppv_run_report *rep = NULL;
        char err[512];
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = bench_now();
        if (ppv_run(s, o, &rep, err, sizeof err) < 0 || rep->world.status != PPV_RUN_DONE) {
            fprintf(stderr, "ppv_bench_mpi: %s\n", rep ? rep->world.message : err);
            exit(2);
        }
        double dt = bench_now() - t0;
        if (dt < best) best = dt;
        ppv_run_report_free(rep);
    }
    return best;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 200;
    MPI_Init(&argc, &argv);
    char err[512];
    ppv_proc *p = NULL;
    if (ppv_proc_start("mpi", &p, err, sizeof err) < 0) {
        fprintf(stderr, "ppv_bench_mpi: %s\n", err);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int me = ppv_proc_rank(p), n = ppv_proc_size(p);
    if (n < 2) {
        fprintf(stderr, "ppv_bench_mpi: run it under mpirun -np 2 (or more)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (me == 0)
        printf("ping-pong, rank 0 <-> 1, us per round trip (best of 5 x %d)\n%9s %10s %10s %8s "
               "%10s %8s\n",
               rounds, "bytes", "raw", "rendezvous", "over", "eager", "over");
    static const int sizes[] = {1 << 10, 1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22};
    char *buf = calloc(1, 1 << 22);
    if (!buf) MPI_Abort(MPI_COMM_WORLD, 2);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int bytes = sizes[k], r = bytes >= (1 << 20) ? rounds / 4 + 1 : rounds;
        ppv_transport rdv, eag;
        double raw = 1e30, trdv = 1e30, teag = 1e30;
        for (int rep = 0; rep < 3; rep++) { /* alternated: the machine drifts */
            double a = raw_pingpong(me, buf, bytes, r);
            if (configure(p, "rendezvous", &rdv) < 0) MPI_Abort(MPI_COMM_WORLD, 2);
            double b = ppv_pingpong(&rdv, me, buf, (size_t)bytes, r);
            if (configure(p, "eager", &eag) < 0) MPI_Abort(MPI_COMM_WORLD, 2);
            double c = ppv_pingpong(&eag, me, buf, (size_t)bytes, r);
            ppv_proc_settle(p);
            raw = a < raw ? a : raw;
            trdv = b < trdv ? b : trdv;
            teag = c < teag ? c : teag;
        }
        if (me == 0)
            printf("%9d %10.1f %10.1f %+7.1f%% %10.1f %+7.1f%%\n", bytes, raw * 1e6, trdv * 1e6,
                   (trdv / raw - 1) * 100, teag * 1e6, (teag / raw - 1) * 100);
    }
    free(buf);

    /* a training step: the transport against the mock */
    ppv_gen_params gp = {n, 4 * n, 0};
    ppv_schedule *s = NULL;
    if (ppv_generate("1f1b", &gp, &s, err, sizeof err) < 0) MPI_Abort(MPI_COMM_WORLD, 2);
    ppv_run_options o = ppv_run_defaults();
    o.model.layers = 2 * n;
    o.model.d_model = 128;
    o.model.d_ff = 256;
    double mock = 0;
    if (me == 0) mock = step_time(s, &o);
    else
        for (int k = 0; k < 3; k++) MPI_Barrier(MPI_COMM_WORLD); /* rank 0's step_time barriers */
    o.proc = p;
    double mpi = step_time(s, &o);
    if (me == 0)
        printf("ppv run, 1f1b p=%d m=%d, %d layers of width 128: mock (one process) %.3f s, "
               "mpi (%d processes) %.3f s\n",
               n, 4 * n, o.model.layers, mock, n, mpi);
    ppv_schedule_free(s);
    ppv_proc_end(p);
    MPI_Finalize();
    return 0;
}
