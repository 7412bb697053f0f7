/* test_check_messages.c - a negative case for every problem the static
 * checker (engine/check/check.c) can put in a ppv_check_report: each error
 * message and each reason a blocked rank is given. A row of the table is a
 * tiny schedule, the send semantics to check it under, and the problem
 * expected: the exact text, the rank, the action index and its spelling
 * (for a deadlock also the blocked ranks and the wait-for cycle), plus the
 * error count. Rows with a mended schedule are positive controls: the
 * table cannot pass by every schedule failing.
 *
 * check_messages lists the messages check.c writes; every entry needs a
 * row, and a scan of check.c's string literals fails when check.c gains a
 * message the list does not hold. When check.c gets a new message, add it
 * to check_messages and add a row. */
#include "testutil.h"

/* ---- the messages check.c writes ------------------------------------------- */

/* Each message as check.c formats it, the text of a "%s" argument that is a
 * fixed phrase written in: "%s%s" with "the last stage has no next stage
 * to send to" is listed as "the last stage has no next stage to send
 * to%s". A trailing %s is the place, " (file:line:col)". */
#define FIFO_PAIR                                                                                  \
    "rank %d's %s (index %d) receives rank %d's %s (index %d): FIFO order on channel %d->%d "      \
    "pairs them (message #%lld), but "
#define COLL_PAIR                                                                                  \
    "collective #%d on group '%s': rank %d's %s (index %d) and rank %d's %s (index %d) do not "    \
    "match: "
static const char *const check_messages[] = {
    /* 1. per-rank structure (check_rank) */
    "duplicate forward of stage %d microbatch %d%s",
    "input not computed yet: %dF%d must come earlier on rank %d%s",
    "no %dRECV_F%d before it: its input from rank %d never arrives%s",
    "backward before its forward %dF%d%s",
    "duplicate backward of stage %d microbatch %d%s",
    "gradient not computed yet: the backward of stage %d microbatch %d must come earlier on rank "
    "%d%s",
    "no %dRECV_B%d before it: its gradient from rank %d never arrives%s",
    "W after the full backward %dB%d, which already computed the weight gradient%s",
    "W without a prior I for stage %d microbatch %d%s",
    "duplicate W%s",
    "backward after %dREDUCE_GRAD: the stage's gradients are final from there on%s",
    "W after %dREDUCE_GRAD: the stage's gradients are final from there on%s",
    "duplicate REDUCE_GRAD%s",
    "recompute must come after %dF%d and before its backward%s",
    "sends a forward not computed yet%s",
    "the last stage has no next stage to send to%s",
    "the next stage is on this rank: no message is needed%s",
    "duplicate SEND_F%s",
    "sends a gradient not computed yet%s",
    "stage 0 has no previous stage to send to%s",
    "the previous stage is on this rank: no message is needed%s",
    "duplicate SEND_B%s",
    "stage 0 receives no forward input%s",
    "the previous stage is on this rank: no message comes%s",
    "duplicate RECV_F%s",
    "the last stage receives no gradient%s",
    "the next stage is on this rank: no message comes%s",
    "duplicate RECV_B%s",
    "GROUP_START inside the group opened at index %d (groups do not nest)%s",
    "GROUP_END without GROUP_START%s",
    "expected_generator_calls=%d but %d GEN follow it",
    "rank %d is not a member of group '%s'%s",
    "%s inside a group: only messages and collectives may be grouped%s",
    "GROUP_START is never closed",
    /* per stage and microbatch (cell_errors) */
    "stage %d has no forward %dF%lld (each of the %d microbatches runs once per stage)",
    "stage %d has no backward (%dB%lld or %dI%lld) for microbatch %lld",
    "stage %d microbatch %lld has I but no W: the weight gradient is never computed",
    /* 2. matching (match_messages, pair_mismatch, match_collectives) */
    FIFO_PAIR "one is a pipeline message and the other a native SEND/RECV",
    FIFO_PAIR "one carries activations (F) and the other gradients (B)",
    FIFO_PAIR "the send is for stage %d and the receive for stage %d",
    FIFO_PAIR "they name different microbatches (%d sent, %d expected)",
    FIFO_PAIR "tags differ (%d sent, %d expected)",
    FIFO_PAIR "sizes differ (%lld bytes sent, %lld expected)",
    FIFO_PAIR "dtypes differ (%s sent, %s expected)",
    "no receive on rank %d matches it: rank %d sends %lld messages to rank %d, which receives %lld",
    "no send from rank %d matches it: rank %d receives %lld messages from rank %d, which sends "
    "%lld",
    "rank %d issues only %d collectives on group '%s'; others issue collective #%d",
    COLL_PAIR "kinds differ",
    COLL_PAIR "roots differ",
    COLL_PAIR "sizes differ",
    COLL_PAIR "dtypes differ",
    /* 3. why a blocked rank waits (describe_wait) */
    "collective on group '%s' that not every member joins",
    "collective #%d on group '%s': rank %d never issues it",
    "collective #%d on group '%s': rank %d has not reached it",
    "no rank can ever be its peer",
    "no receive on rank %d ever matches it",
    "no send on rank %d ever matches it",
    "send (rendezvous) waits for rank %d to reach %s (index %d)",
    "receive waits for rank %d to reach %s (index %d)",
    /* a compute-only schedule whose compute order cannot progress
     * (report_dependency_deadlock) */
    "needs the activation of %dF%d from rank %d, which has not computed it",
    "needs the input gradient of %dB/I%d from rank %d, which has not computed it",
    "needs the activation of %dF%d from rank %d, which comes later on this same rank",
    "needs the input gradient of %dB/I%d from rank %d, which comes later on this same rank",
};

/* Messages in check.c that no schedule can produce, so no row has them:
 * lowering (lower.c) stops a rank only on an action whose input stage is
 * not computed (ppv_input_stage >= 0), so the stuck run always holds an
 * action that needs something; this reason is a guard. */
static const char *const unreachable_messages[] = {
    "waits for nothing yet cannot run",
};

/* String literals of check.c that are no report message: the place suffix,
 * an include, the semantics' spellings, and ppv_schedule_check's own
 * errors, which go to its err buffer (test_check.c tests those). */
static const char *const not_report_messages[] = {
    " (%s:%d:%d)",
    "check_internal.h",
    "rendezvous",
    "eager",
    "eager:",
    "eager:%lld",
    "costs need F > 0, B > W >= 0 and C >= 0 (got %g,%g,%g,%g)",
    "%s: no action: no stage or microbatch to check",
    "memory fractions must lie in [0, 1]",
    "%s gives costs for %d stage%s, but %s has %d",
    "",
    "s",
    "out of memory",
    "out of memory while checking %s",
};

#define NMESSAGES (sizeof check_messages / sizeof check_messages[0])

/* ---- the table -------------------------------------------------------------------- */

typedef struct row {
    const char *fmt;     /* the entry of check_messages it covers */
    const char *sem;     /* send semantics: rendezvous, eager, eager:BYTES */
    const char *text;    /* the schedule, named t.ppv (native) or t.csv in messages */
    int wait;            /* 1: a blocked rank's reason; 0: an error */
    int32_t rank, index; /* where it is reported (index -1: a per-stage count) */
    const char *action;  /* the action there, as ppv_action_format spells it */
    int32_t waits_for;   /* wait rows: the rank it waits for (-1: none can come) */
    const char *message; /* the exact text */
    int64_t errors;      /* errors_total */
    const char *blocked; /* the blocked ranks, as "0 1"; NULL: no deadlock */
    const char *cycle;   /* the wait-for cycle's ranks in order; "" when there is none */
    const char *fixed;   /* the schedule mended, which checks ok; NULL when not given */
} row;

#define AT(r, i, a) .rank = (r), .index = (i), .action = (a)
#define WAITS(r, i, a, w) .wait = 1, AT(r, i, a), .waits_for = (w)
#define NATIVE1 "ppv-schedule 1\nranks 1\nrank 0\n" /* actions from line 4 */
#define NATIVE2 "ppv-schedule 1\nranks 2\n"
#define NATIVE2G "ppv-schedule 1\nranks 2\ngroup g 0 1\n"

/* A row per block, its fields packed. */
/* clang-format off */
static const row rows[] = {
    /* ---- 1. per-rank structure ---- */
    {.fmt = "duplicate forward of stage %d microbatch %d%s", .sem = "rendezvous",
     .text = "0F0,0F0\n", AT(0, 1, "0F0"),
     .message = "duplicate forward of stage 0 microbatch 0 (t.csv:1:5)", .errors = 1,
     .fixed = "0F0\n"},
    {.fmt = "input not computed yet: %dF%d must come earlier on rank %d%s", .sem = "eager",
     .text = "1F0,0F0\n", AT(0, 0, "1F0"),
     .message = "input not computed yet: 0F0 must come earlier on rank 0 (t.csv:1:1)",
     .errors = 1, .fixed = "0F0,1F0\n"},
    {.fmt = "no %dRECV_F%d before it: its input from rank %d never arrives%s",
     .sem = "rendezvous", .text = "0F0,0SEND_F0\n1F0,1RECV_F0\n", AT(1, 0, "1F0"),
     .message = "no 1RECV_F0 before it: its input from rank 0 never arrives (t.csv:2:1)",
     .errors = 1, .fixed = "0F0,0SEND_F0\n1RECV_F0,1F0\n"},
    {.fmt = "backward before its forward %dF%d%s", .sem = "rendezvous", .text = "0B0,0F0\n",
     AT(0, 0, "0B0"), .message = "backward before its forward 0F0 (t.csv:1:1)", .errors = 1,
     .fixed = "0F0,0B0\n"},
    {.fmt = "duplicate backward of stage %d microbatch %d%s", .sem = "rendezvous",
     .text = "0F0,0B0,0B0\n", AT(0, 2, "0B0"),
     .message = "duplicate backward of stage 0 microbatch 0 (t.csv:1:9)", .errors = 1,
     .fixed = "0F0,0B0\n"},
    {.fmt = "gradient not computed yet: the backward of stage %d microbatch %d must come earlier "
            "on rank %d%s",
     .sem = "rendezvous", .text = "0F0,1F0,0B0,1B0\n", AT(0, 2, "0B0"),
     .message = "gradient not computed yet: the backward of stage 1 microbatch 0 must come "
                "earlier on rank 0 (t.csv:1:9)",
     .errors = 1, .fixed = "0F0,1F0,1B0,0B0\n"},
    {.fmt = "no %dRECV_B%d before it: its gradient from rank %d never arrives%s",
     .sem = "rendezvous", .text = "0F0,0SEND_F0,0B0,0RECV_B0\n1RECV_F0,1F0,1B0,1SEND_B0\n",
     AT(0, 2, "0B0"),
     .message = "no 0RECV_B0 before it: its gradient from rank 1 never arrives (t.csv:1:14)",
     .errors = 1, .fixed = "0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n"},
    /* native: a CSV with B and W but no I reads in the older dialect */
    {.fmt = "W after the full backward %dB%d, which already computed the weight gradient%s",
     .sem = "rendezvous", .text = NATIVE1 "0F0\n0B0\n0W0\n", AT(0, 2, "0W0"),
     .message = "W after the full backward 0B0, which already computed the weight gradient "
                "(t.ppv:6:1)",
     .errors = 1, .fixed = NATIVE1 "0F0\n0I0\n0W0\n"},
    {.fmt = "W without a prior I for stage %d microbatch %d%s", .sem = "rendezvous",
     .text = "0F0,0W0,0I0\n", AT(0, 1, "0W0"),
     .message = "W without a prior I for stage 0 microbatch 0 (t.csv:1:5)", .errors = 1,
     .fixed = "0F0,0I0,0W0\n"},
    {.fmt = "duplicate W%s", .sem = "rendezvous", .text = "0F0,0I0,0W0,0W0\n", AT(0, 3, "0W0"),
     .message = "duplicate W (t.csv:1:13)", .errors = 1, .fixed = "0F0,0I0,0W0\n"},
    /* REDUCE_GRAD: PyTorch scales (and reduces) the stage's gradients there */
    {.fmt = "backward after %dREDUCE_GRAD: the stage's gradients are final from there on%s",
     .sem = "rendezvous", .text = "0F0,0F1,0B0,0REDUCE_GRAD,0B1\n", AT(0, 4, "0B1"),
     .message = "backward after 0REDUCE_GRAD: the stage's gradients are final from there on "
                "(t.csv:1:26)",
     .errors = 1, .fixed = "0F0,0F1,0B0,0B1,0REDUCE_GRAD\n"},
    {.fmt = "W after %dREDUCE_GRAD: the stage's gradients are final from there on%s",
     .sem = "rendezvous", .text = "0F0,0I0,0REDUCE_GRAD,0W0\n", AT(0, 3, "0W0"),
     .message = "W after 0REDUCE_GRAD: the stage's gradients are final from there on "
                "(t.csv:1:22)",
     .errors = 1, .fixed = "0F0,0I0,0W0,0REDUCE_GRAD\n"},
    {.fmt = "duplicate REDUCE_GRAD%s", .sem = "rendezvous",
     .text = "0F0,0B0,0REDUCE_GRAD,0REDUCE_GRAD\n", AT(0, 3, "0REDUCE_GRAD"),
     .message = "duplicate REDUCE_GRAD (t.csv:1:22)", .errors = 1,
     .fixed = "0F0,0B0,0REDUCE_GRAD\n"},
    /* R before its F, then R after its backward */
    {.fmt = "recompute must come after %dF%d and before its backward%s", .sem = "rendezvous",
     .text = NATIVE1 "0R0\n0F0\n0B0\n", AT(0, 0, "0R0"),
     .message = "recompute must come after 0F0 and before its backward (t.ppv:4:1)",
     .errors = 1, .fixed = NATIVE1 "0F0\n0R0\n0B0\n"},
    {.fmt = "recompute must come after %dF%d and before its backward%s", .sem = "rendezvous",
     .text = NATIVE1 "0F0\n0B0\n0R0\n", AT(0, 2, "0R0"),
     .message = "recompute must come after 0F0 and before its backward (t.ppv:6:1)",
     .errors = 1, .fixed = NATIVE1 "0F0\n0R0\n0B0\n"},
    {.fmt = "sends a forward not computed yet%s", .sem = "rendezvous",
     .text = "0SEND_F0,0F0\n1RECV_F0,1F0\n", AT(0, 0, "0SEND_F0"),
     .message = "sends a forward not computed yet (t.csv:1:1)", .errors = 1,
     .fixed = "0F0,0SEND_F0\n1RECV_F0,1F0\n"},
    /* eager: the send with no peer completes, so only the error remains */
    {.fmt = "the last stage has no next stage to send to%s", .sem = "eager",
     .text = "0F0,0SEND_F0\n", AT(0, 1, "0SEND_F0"),
     .message = "the last stage has no next stage to send to (t.csv:1:5)", .errors = 1,
     .fixed = "0F0\n"},
    {.fmt = "the next stage is on this rank: no message is needed%s", .sem = "eager",
     .text = "0F0,0SEND_F0,1F0\n", AT(0, 1, "0SEND_F0"),
     .message = "the next stage is on this rank: no message is needed (t.csv:1:5)", .errors = 1,
     .fixed = "0F0,1F0\n"},
    {.fmt = "duplicate SEND_F%s", .sem = "eager", .text = "0F0,0SEND_F0,0SEND_F0\n1RECV_F0,1F0\n",
     AT(0, 2, "0SEND_F0"), .message = "duplicate SEND_F (t.csv:1:14)", .errors = 2,
     .fixed = "0F0,0SEND_F0\n1RECV_F0,1F0\n"},
    {.fmt = "sends a gradient not computed yet%s", .sem = "rendezvous",
     .text = "0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1SEND_B0,1B0\n", AT(1, 2, "1SEND_B0"),
     .message = "sends a gradient not computed yet (t.csv:2:14)", .errors = 1,
     .fixed = "0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n"},
    {.fmt = "stage 0 has no previous stage to send to%s", .sem = "eager",
     .text = "0F0,0B0,0SEND_B0\n", AT(0, 2, "0SEND_B0"),
     .message = "stage 0 has no previous stage to send to (t.csv:1:9)", .errors = 1,
     .fixed = "0F0,0B0\n"},
    {.fmt = "the previous stage is on this rank: no message is needed%s", .sem = "eager",
     .text = "0F0,1F0,1B0,1SEND_B0,0B0\n", AT(0, 3, "1SEND_B0"),
     .message = "the previous stage is on this rank: no message is needed (t.csv:1:13)",
     .errors = 1, .fixed = "0F0,1F0,1B0,0B0\n"},
    {.fmt = "duplicate SEND_B%s", .sem = "eager",
     .text = "0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0,1SEND_B0\n",
     AT(1, 4, "1SEND_B0"), .message = "duplicate SEND_B (t.csv:2:27)", .errors = 2,
     .fixed = "0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n"},
    /* a receive with no peer never completes, under any semantics */
    {.fmt = "stage 0 receives no forward input%s", .sem = "eager", .text = "0RECV_F0,0F0\n",
     AT(0, 0, "0RECV_F0"), .message = "stage 0 receives no forward input (t.csv:1:1)",
     .errors = 1, .blocked = "0", .cycle = "", .fixed = "0F0\n"},
    {.fmt = "the previous stage is on this rank: no message comes%s", .sem = "rendezvous",
     .text = "0F0,1RECV_F0,1F0\n", AT(0, 1, "1RECV_F0"),
     .message = "the previous stage is on this rank: no message comes (t.csv:1:5)", .errors = 1,
     .blocked = "0", .cycle = "", .fixed = "0F0,1F0\n"},
    {.fmt = "duplicate RECV_F%s", .sem = "rendezvous",
     .text = "0F0,0SEND_F0\n1RECV_F0,1RECV_F0,1F0\n", AT(1, 1, "1RECV_F0"),
     .message = "duplicate RECV_F (t.csv:2:10)", .errors = 2, .blocked = "1", .cycle = "",
     .fixed = "0F0,0SEND_F0\n1RECV_F0,1F0\n"},
    {.fmt = "the last stage receives no gradient%s", .sem = "rendezvous",
     .text = "0F0,0RECV_B0,0B0\n", AT(0, 1, "0RECV_B0"),
     .message = "the last stage receives no gradient (t.csv:1:5)", .errors = 1, .blocked = "0",
     .cycle = "", .fixed = "0F0,0B0\n"},
    {.fmt = "the next stage is on this rank: no message comes%s", .sem = "rendezvous",
     .text = "0F0,1F0,1B0,0RECV_B0,0B0\n", AT(0, 3, "0RECV_B0"),
     .message = "the next stage is on this rank: no message comes (t.csv:1:13)", .errors = 1,
     .blocked = "0", .cycle = "", .fixed = "0F0,1F0,1B0,0B0\n"},
    {.fmt = "duplicate RECV_B%s", .sem = "rendezvous",
     .text = "0F0,0SEND_F0,0RECV_B0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n",
     AT(0, 3, "0RECV_B0"), .message = "duplicate RECV_B (t.csv:1:23)", .errors = 2,
     .blocked = "0", .cycle = "",
     .fixed = "0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n"},
    {.fmt = "GROUP_START inside the group opened at index %d (groups do not nest)%s",
     .sem = "rendezvous", .text = NATIVE1 "GROUP_START\nGROUP_START\nGROUP_END\n",
     AT(0, 1, "GROUP_START"),
     .message = "GROUP_START inside the group opened at index 0 (groups do not nest) (t.ppv:5:1)",
     .errors = 1, .fixed = NATIVE1 "GROUP_START\nGROUP_END\n"},
    {.fmt = "GROUP_END without GROUP_START%s", .sem = "rendezvous", .text = NATIVE1 "GROUP_END\n",
     AT(0, 0, "GROUP_END"), .message = "GROUP_END without GROUP_START (t.ppv:4:1)", .errors = 1,
     .fixed = NATIVE1 "GROUP_START\nGROUP_END\n"},
    /* a CHUNK followed by another CHUNK, then the last CHUNK of a rank */
    {.fmt = "expected_generator_calls=%d but %d GEN follow it", .sem = "rendezvous",
     .text = NATIVE1 "CHUNK expected_generator_calls=2\nGEN\nCHUNK expected_generator_calls=0\n",
     AT(0, 0, "CHUNK(2)"), .message = "expected_generator_calls=2 but 1 GEN follow it",
     .errors = 1,
     .fixed = NATIVE1 "CHUNK expected_generator_calls=1\nGEN\nCHUNK expected_generator_calls=0\n"},
    {.fmt = "expected_generator_calls=%d but %d GEN follow it", .sem = "rendezvous",
     .text = NATIVE1 "CHUNK expected_generator_calls=0\nCHUNK expected_generator_calls=2\nGEN\n",
     AT(0, 1, "CHUNK(2)"), .message = "expected_generator_calls=2 but 1 GEN follow it",
     .errors = 1,
     .fixed = NATIVE1 "CHUNK expected_generator_calls=0\nCHUNK expected_generator_calls=2\n"
                      "GEN\nGEN\n"},
    {.fmt = "rank %d is not a member of group '%s'%s", .sem = "rendezvous",
     .text = NATIVE2 "group g 1\nrank 0\nALLREDUCE group=g\nrank 1\nALLREDUCE group=g\n",
     AT(0, 0, "ALLREDUCE@g"), .message = "rank 0 is not a member of group 'g' (t.ppv:5:1)",
     .errors = 1, .blocked = "0", .cycle = "",
     .fixed = NATIVE2G "rank 0\nALLREDUCE group=g\nrank 1\nALLREDUCE group=g\n"},
    /* a compute, a CHUNK and a stage action without a microbatch, grouped */
    {.fmt = "%s inside a group: only messages and collectives may be grouped%s",
     .sem = "rendezvous", .text = NATIVE1 "GROUP_START\n0F0\nGROUP_END\n", AT(0, 1, "0F0"),
     .message = "0F0 inside a group: only messages and collectives may be grouped (t.ppv:5:1)",
     .errors = 1, .fixed = NATIVE1 "GROUP_START\nGROUP_END\n0F0\n"},
    {.fmt = "%s inside a group: only messages and collectives may be grouped%s",
     .sem = "rendezvous",
     .text = NATIVE1 "GROUP_START\nCHUNK expected_generator_calls=0\nGROUP_END\n",
     AT(0, 1, "CHUNK(0)"),
     .message = "CHUNK(0) inside a group: only messages and collectives may be grouped "
                "(t.ppv:5:1)",
     .errors = 1},
    {.fmt = "%s inside a group: only messages and collectives may be grouped%s",
     .sem = "rendezvous", .text = NATIVE1 "GROUP_START\n0UNSHARD\nGROUP_END\n",
     AT(0, 1, "0UNSHARD"),
     .message = "0UNSHARD inside a group: only messages and collectives may be grouped "
                "(t.ppv:5:1)",
     .errors = 1},
    {.fmt = "GROUP_START is never closed", .sem = "rendezvous", .text = NATIVE1 "GROUP_START\n",
     AT(0, 0, "GROUP_START"), .message = "GROUP_START is never closed", .errors = 1,
     .fixed = NATIVE1 "GROUP_START\nGROUP_END\n"},

    /* ---- per stage and microbatch: index -1, no action ---- */
    /* a microbatch no action of the stage names, before and after the named
     * ones: dense cells (every pair a cell), then sparse ones (the pairs
     * between named ones are a gap, which missing_cells stores up to 1000
     * errors of and counts); then a microbatch only a B names */
    {.fmt = "stage %d has no forward %dF%lld (each of the %d microbatches runs once per stage)",
     .sem = "rendezvous", .text = "0F0,0F1\n1F1\n", AT(1, -1, ""),
     .message = "stage 1 has no forward 1F0 (each of the 2 microbatches runs once per stage)",
     .errors = 1, .fixed = "0F0,0F1\n1F0,1F1\n"},
    {.fmt = "stage %d has no forward %dF%lld (each of the %d microbatches runs once per stage)",
     .sem = "rendezvous", .text = "0F0,0F1100\n", AT(0, -1, ""),
     .message = "stage 0 has no forward 0F1 (each of the 1101 microbatches runs once per stage)",
     .errors = 1099},
    {.fmt = "stage %d has no forward %dF%lld (each of the %d microbatches runs once per stage)",
     .sem = "rendezvous", .text = "ppv-schedule 1\nranks 1\nmicrobatches 1100\nrank 0\n0F0\n",
     AT(0, -1, ""),
     .message = "stage 0 has no forward 0F1 (each of the 1100 microbatches runs once per stage)",
     .errors = 1099, .fixed = "ppv-schedule 1\nranks 1\nmicrobatches 1\nrank 0\n0F0\n"},
    {.fmt = "stage %d has no forward %dF%lld (each of the %d microbatches runs once per stage)",
     .sem = "rendezvous", .text = "0F0,0B0,0B1\n", AT(0, -1, ""),
     .message = "stage 0 has no forward 0F1 (each of the 2 microbatches runs once per stage)",
     .errors = 2, .fixed = "0F0,0B0,0F1,0B1\n"},
    {.fmt = "stage %d has no forward %dF%lld (each of the %d microbatches runs once per stage)",
     .sem = "rendezvous", .text = "0F0,0F1\n1F0\n", AT(1, -1, ""),
     .message = "stage 1 has no forward 1F1 (each of the 2 microbatches runs once per stage)",
     .errors = 1, .fixed = "0F0,0F1\n1F0,1F1\n"},
    {.fmt = "stage %d has no backward (%dB%lld or %dI%lld) for microbatch %lld",
     .sem = "rendezvous", .text = "0F0,0F1,0B0\n", AT(0, -1, ""),
     .message = "stage 0 has no backward (0B1 or 0I1) for microbatch 1", .errors = 1,
     .fixed = "0F0,0F1,0B0,0B1\n"},
    {.fmt = "stage %d has no backward (%dB%lld or %dI%lld) for microbatch %lld",
     .sem = "rendezvous", .text = "0F1,0B1\n", AT(0, -1, ""),
     .message = "stage 0 has no backward (0B0 or 0I0) for microbatch 0", .errors = 2,
     .fixed = "0F0,0B0,0F1,0B1\n"},
    {.fmt = "stage %d has no backward (%dB%lld or %dI%lld) for microbatch %lld",
     .sem = "rendezvous", .text = "0F0,0B0\n1F0,1B0,1F1,1B1\n", AT(0, -1, ""),
     .message = "stage 0 has no backward (0B1 or 0I1) for microbatch 1", .errors = 2,
     .fixed = "0F0,0B0,0F1,0B1\n1F0,1B0,1F1,1B1\n"},
    {.fmt = "stage %d has no backward (%dB%lld or %dI%lld) for microbatch %lld",
     .sem = "rendezvous", .text = "0F0,0B0,0F1100,0B1100\n", AT(0, -1, ""),
     .message = "stage 0 has no backward (0B1 or 0I1) for microbatch 1", .errors = 2198},
    {.fmt = "stage %d microbatch %lld has I but no W: the weight gradient is never computed",
     .sem = "rendezvous", .text = "0F0,0I0\n", AT(0, -1, ""),
     .message = "stage 0 microbatch 0 has I but no W: the weight gradient is never computed",
     .errors = 1, .fixed = "0F0,0I0,0W0\n"},

    /* ---- 2. matching ---- */
    {.fmt = FIFO_PAIR "one is a pipeline message and the other a native SEND/RECV",
     .sem = "rendezvous", .text = NATIVE2 "rank 0\n0F0\nSEND peer=1\nrank 1\n1RECV_F0\n1F0\n",
     AT(1, 0, "1RECV_F0"),
     .message = "rank 1's 1RECV_F0 (index 0) receives rank 0's SEND>1#0 (index 1): FIFO order "
                "on channel 0->1 pairs them (message #0), but one is a pipeline message and the "
                "other a native SEND/RECV",
     .errors = 1, .fixed = NATIVE2 "rank 0\n0F0\n0SEND_F0\nrank 1\n1RECV_F0\n1F0\n"},
    /* stages 0 and 2 on rank 0, 1 on rank 1: channel 0->1 carries an F and a B */
    {.fmt = FIFO_PAIR "one carries activations (F) and the other gradients (B)",
     .sem = "rendezvous",
     .text = "0F0,0SEND_F0,2RECV_F0,2F0,2B0,2SEND_B0,0RECV_B0,0B0\n"
             "1RECV_B0,1RECV_F0,1F0,1SEND_F0,1B0,1SEND_B0\n",
     AT(1, 0, "1RECV_B0"),
     .message = "rank 1's 1RECV_B0 (index 0) receives rank 0's 0SEND_F0 (index 1): FIFO order "
                "on channel 0->1 pairs them (message #0), but one carries activations (F) and "
                "the other gradients (B)",
     .errors = 2, .blocked = "0 1", .cycle = "0 1",
     .fixed = "0F0,0SEND_F0,2RECV_F0,2F0,2B0,2SEND_B0,0RECV_B0,0B0\n"
              "1RECV_F0,1F0,1SEND_F0,1RECV_B0,1B0,1SEND_B0\n"},
    /* stages 0 and 2 on rank 0, 1 and 3 on rank 1: channel 0->1 feeds two stages */
    {.fmt = FIFO_PAIR "the send is for stage %d and the receive for stage %d",
     .sem = "rendezvous",
     .text = "0F0,0SEND_F0,2RECV_F0,2F0,2SEND_F0\n3RECV_F0,1RECV_F0,1F0,1SEND_F0,3F0\n",
     AT(1, 0, "3RECV_F0"),
     .message = "rank 1's 3RECV_F0 (index 0) receives rank 0's 0SEND_F0 (index 1): FIFO order "
                "on channel 0->1 pairs them (message #0), but the send is for stage 1 and the "
                "receive for stage 3",
     .errors = 2, .blocked = "0 1", .cycle = "0 1",
     .fixed = "0F0,0SEND_F0,2RECV_F0,2F0,2SEND_F0\n1RECV_F0,1F0,1SEND_F0,3RECV_F0,3F0\n"},
    {.fmt = FIFO_PAIR "they name different microbatches (%d sent, %d expected)",
     .sem = "rendezvous", .text = "0F0,0F1,0SEND_F0,0SEND_F1\n1RECV_F1,1RECV_F0,1F0,1F1\n",
     AT(1, 1, "1RECV_F0"),
     .message = "rank 1's 1RECV_F0 (index 1) receives rank 0's 0SEND_F1 (index 3): FIFO order "
                "on channel 0->1 pairs them (message #1), but they name different microbatches "
                "(1 sent, 0 expected)",
     .errors = 2, .fixed = "0F0,0F1,0SEND_F0,0SEND_F1\n1RECV_F0,1RECV_F1,1F0,1F1\n"},
    {.fmt = FIFO_PAIR "tags differ (%d sent, %d expected)", .sem = "rendezvous",
     .text = NATIVE2 "rank 0\nSEND peer=1 tag=1\nrank 1\nRECV peer=0 tag=2\n",
     AT(1, 0, "RECV<0#2"),
     .message = "rank 1's RECV<0#2 (index 0) receives rank 0's SEND>1#1 (index 0): FIFO order "
                "on channel 0->1 pairs them (message #0), but tags differ (1 sent, 2 expected)",
     .errors = 1, .fixed = NATIVE2 "rank 0\nSEND peer=1 tag=2\nrank 1\nRECV peer=0 tag=2\n"},
    {.fmt = FIFO_PAIR "sizes differ (%lld bytes sent, %lld expected)", .sem = "eager:4K",
     .text = NATIVE2 "rank 0\nSEND peer=1 bytes=4\nrank 1\nRECV peer=0 bytes=8\n",
     AT(1, 0, "RECV<0#0"),
     .message = "rank 1's RECV<0#0 (index 0) receives rank 0's SEND>1#0 (index 0): FIFO order "
                "on channel 0->1 pairs them (message #0), but sizes differ (4 bytes sent, 8 "
                "expected)",
     .errors = 1, .fixed = NATIVE2 "rank 0\nSEND peer=1 bytes=8\nrank 1\nRECV peer=0 bytes=8\n"},
    {.fmt = FIFO_PAIR "dtypes differ (%s sent, %s expected)", .sem = "rendezvous",
     .text = NATIVE2 "rank 0\nSEND peer=1 dtype=bf16\nrank 1\nRECV peer=0 dtype=f32\n",
     AT(1, 0, "RECV<0#0"),
     .message = "rank 1's RECV<0#0 (index 0) receives rank 0's SEND>1#0 (index 0): FIFO order "
                "on channel 0->1 pairs them (message #0), but dtypes differ (bf16 sent, f32 "
                "expected)",
     .errors = 1,
     .fixed = NATIVE2 "rank 0\nSEND peer=1 dtype=f32\nrank 1\nRECV peer=0 dtype=f32\n"},
    {.fmt = "no receive on rank %d matches it: rank %d sends %lld messages to rank %d, which "
            "receives %lld",
     .sem = "eager", .text = "0F0,0SEND_F0,0SEND_F0\n1RECV_F0,1F0\n", AT(0, 2, "0SEND_F0"),
     .message = "no receive on rank 1 matches it: rank 0 sends 2 messages to rank 1, which "
                "receives 1",
     .errors = 2, .fixed = "0F0,0SEND_F0\n1RECV_F0,1F0\n"},
    {.fmt = "no receive on rank %d matches it: rank %d sends %lld messages to rank %d, which "
            "receives %lld",
     .sem = "eager", .text = NATIVE2 "rank 0\nSEND peer=1\nrank 1\n", AT(0, 0, "SEND>1#0"),
     .message = "no receive on rank 1 matches it: rank 0 sends 1 messages to rank 1, which "
                "receives 0",
     .errors = 1, .fixed = NATIVE2 "rank 0\nSEND peer=1\nrank 1\nRECV peer=0\n"},
    {.fmt = "no send from rank %d matches it: rank %d receives %lld messages from rank %d, "
            "which sends %lld",
     .sem = "eager", .text = NATIVE2 "rank 0\nRECV peer=1\nrank 1\n", AT(0, 0, "RECV<1#0"),
     .message = "no send from rank 1 matches it: rank 0 receives 1 messages from rank 1, which "
                "sends 0",
     .errors = 1, .blocked = "0", .cycle = "",
     .fixed = NATIVE2 "rank 0\nRECV peer=1\nrank 1\nSEND peer=0\n"},
    {.fmt = "rank %d issues only %d collectives on group '%s'; others issue collective #%d",
     .sem = "rendezvous",
     .text = NATIVE2G "rank 0\nBARRIER group=g\nBARRIER group=g\nrank 1\nBARRIER group=g\n",
     AT(1, -1, ""),
     .message = "rank 1 issues only 1 collectives on group 'g'; others issue collective #1",
     .errors = 1, .blocked = "0", .cycle = "",
     .fixed = NATIVE2G "rank 0\nBARRIER group=g\nBARRIER group=g\nrank 1\nBARRIER "
                       "group=g\nBARRIER group=g\n"},
    {.fmt = COLL_PAIR "kinds differ", .sem = "rendezvous",
     .text = NATIVE2G "rank 0\nALLREDUCE group=g\nrank 1\nBARRIER group=g\n",
     AT(1, 0, "BARRIER@g"),
     .message = "collective #0 on group 'g': rank 1's BARRIER@g (index 0) and rank 0's "
                "ALLREDUCE@g (index 0) do not match: kinds differ",
     .errors = 1, .fixed = NATIVE2G "rank 0\nBARRIER group=g\nrank 1\nBARRIER group=g\n"},
    {.fmt = COLL_PAIR "roots differ", .sem = "rendezvous",
     .text = NATIVE2G "rank 0\nBCAST group=g root=0\nrank 1\nBCAST group=g root=1\n",
     AT(1, 0, "BCAST@g"),
     .message = "collective #0 on group 'g': rank 1's BCAST@g (index 0) and rank 0's BCAST@g "
                "(index 0) do not match: roots differ",
     .errors = 1,
     .fixed = NATIVE2G "rank 0\nBCAST group=g root=1\nrank 1\nBCAST group=g root=1\n"},
    {.fmt = COLL_PAIR "sizes differ", .sem = "eager",
     .text = NATIVE2G "rank 0\nALLGATHER group=g bytes=4\nrank 1\nALLGATHER group=g bytes=8\n",
     AT(1, 0, "ALLGATHER@g"),
     .message = "collective #0 on group 'g': rank 1's ALLGATHER@g (index 0) and rank 0's "
                "ALLGATHER@g (index 0) do not match: sizes differ",
     .errors = 1,
     .fixed = NATIVE2G "rank 0\nALLGATHER group=g bytes=8\nrank 1\nALLGATHER group=g bytes=8\n"},
    {.fmt = COLL_PAIR "dtypes differ", .sem = "rendezvous",
     .text = NATIVE2G "rank 0\nALLREDUCE group=g dtype=f32\nrank 1\nALLREDUCE group=g "
                      "dtype=bf16\n",
     AT(1, 0, "ALLREDUCE@g"),
     .message = "collective #0 on group 'g': rank 1's ALLREDUCE@g (index 0) and rank 0's "
                "ALLREDUCE@g (index 0) do not match: dtypes differ",
     .errors = 1,
     .fixed = NATIVE2G "rank 0\nALLREDUCE group=g dtype=f32\nrank 1\nALLREDUCE group=g "
                       "dtype=f32\n"},

    /* ---- 3. deadlock: why each blocked rank waits ---- */
    {.fmt = "collective on group '%s' that not every member joins", .sem = "rendezvous",
     .text = NATIVE2 "group g 1\nrank 0\nALLREDUCE group=g\nrank 1\nALLREDUCE group=g\n",
     WAITS(0, 0, "ALLREDUCE@g", -1),
     .message = "collective on group 'g' that not every member joins", .errors = 1,
     .blocked = "0", .cycle = "",
     .fixed = NATIVE2G "rank 0\nALLREDUCE group=g\nrank 1\nALLREDUCE group=g\n"},
    {.fmt = "collective #%d on group '%s': rank %d never issues it", .sem = "rendezvous",
     .text = NATIVE2G "rank 0\nBARRIER group=g\nBARRIER group=g\nrank 1\nBARRIER group=g\n",
     WAITS(0, 1, "BARRIER@g", 1),
     .message = "collective #1 on group 'g': rank 1 never issues it", .errors = 1,
     .blocked = "0", .cycle = ""},
    /* rank 1 receives before the collective, rank 0 sends after it */
    {.fmt = "collective #%d on group '%s': rank %d has not reached it", .sem = "eager",
     .text = NATIVE2G "rank 0\nALLREDUCE group=g\nSEND peer=1\nrank 1\nRECV peer=0\nALLREDUCE "
                      "group=g\n",
     WAITS(0, 0, "ALLREDUCE@g", 1),
     .message = "collective #0 on group 'g': rank 1 has not reached it", .errors = 0,
     .blocked = "0 1", .cycle = "0 1",
     .fixed = NATIVE2G "rank 0\nALLREDUCE group=g\nSEND peer=1\nrank 1\nALLREDUCE "
                       "group=g\nRECV peer=0\n"},
    {.fmt = "receive waits for rank %d to reach %s (index %d)", .sem = "eager",
     .text = NATIVE2G "rank 0\nALLREDUCE group=g\nSEND peer=1\nrank 1\nRECV peer=0\nALLREDUCE "
                      "group=g\n",
     WAITS(1, 0, "RECV<0#0", 0),
     .message = "receive waits for rank 0 to reach SEND>1#0 (index 1)", .errors = 0,
     .blocked = "0 1", .cycle = "0 1"},
    /* rendezvous: the send with no peer never completes */
    {.fmt = "no rank can ever be its peer", .sem = "rendezvous", .text = "0F0,0SEND_F0\n",
     WAITS(0, 1, "0SEND_F0", -1), .message = "no rank can ever be its peer", .errors = 1,
     .blocked = "0", .cycle = "", .fixed = "0F0\n"},
    {.fmt = "no rank can ever be its peer", .sem = "eager", .text = "0F0,0RECV_B0,0B0\n",
     WAITS(0, 1, "0RECV_B0", -1), .message = "no rank can ever be its peer", .errors = 1,
     .blocked = "0", .cycle = ""},
    /* 8 bytes are above eager:4's limit, so the send waits as under rendezvous */
    {.fmt = "no receive on rank %d ever matches it", .sem = "eager:4",
     .text = NATIVE2 "rank 0\nSEND peer=1 bytes=8\nrank 1\n", WAITS(0, 0, "SEND>1#0", 1),
     .message = "no receive on rank 1 ever matches it", .errors = 1, .blocked = "0",
     .cycle = "", .fixed = NATIVE2 "rank 0\nSEND peer=1 bytes=8\nrank 1\nRECV peer=0\n"},
    {.fmt = "no send on rank %d ever matches it", .sem = "rendezvous",
     .text = "0F0,0SEND_F0\n1RECV_F0,1RECV_F0,1F0\n", WAITS(1, 1, "1RECV_F0", 0),
     .message = "no send on rank 0 ever matches it", .errors = 2, .blocked = "1", .cycle = ""},
    /* both ranks send first: the swap that hangs once messages outgrow the buffer */
    {.fmt = "send (rendezvous) waits for rank %d to reach %s (index %d)", .sem = "eager:4",
     .text = NATIVE2 "rank 0\nSEND peer=1 bytes=8\nRECV peer=1 bytes=8\nrank 1\nSEND peer=0 "
                     "bytes=8\nRECV peer=0 bytes=8\n",
     WAITS(0, 0, "SEND>1#0", 1),
     .message = "send (rendezvous) waits for rank 1 to reach RECV<0#0 (index 1)", .errors = 0,
     .blocked = "0 1", .cycle = "0 1",
     .fixed = NATIVE2 "rank 0\nSEND peer=1 bytes=8\nRECV peer=1 bytes=8\nrank 1\nRECV peer=0 "
                      "bytes=8\nSEND peer=0 bytes=8\n"},
    {.fmt = "send (rendezvous) waits for rank %d to reach %s (index %d)", .sem = "eager:4",
     .text = NATIVE2 "rank 0\nSEND peer=1 bytes=8\nRECV peer=1 bytes=8\nrank 1\nSEND peer=0 "
                     "bytes=8\nRECV peer=0 bytes=8\n",
     WAITS(1, 0, "SEND>0#0", 0),
     .message = "send (rendezvous) waits for rank 0 to reach RECV<1#0 (index 1)", .errors = 0,
     .blocked = "0 1", .cycle = "0 1",
     .fixed = NATIVE2 "rank 0\nGROUP_START\nSEND peer=1 bytes=8\nRECV peer=1 "
                      "bytes=8\nGROUP_END\nrank 1\nGROUP_START\nSEND peer=0 bytes=8\nRECV "
                      "peer=0 bytes=8\nGROUP_END\n"},
    /* compute-only: each rank waits for the other's compute */
    {.fmt = "needs the activation of %dF%d from rank %d, which has not computed it",
     .sem = "rendezvous", .text = "0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n", WAITS(1, 0, "1F1", 0),
     .message = "needs the activation of 0F1 from rank 0, which has not computed it",
     .errors = 0, .blocked = "0 1", .cycle = "0 1",
     .fixed = "0F0,0B0,0F1,0B1\n1F0,1B0,1F1,1B1\n"},
    {.fmt = "needs the input gradient of %dB/I%d from rank %d, which has not computed it",
     .sem = "eager", .text = "0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n", WAITS(0, 1, "0B0", 1),
     .message = "needs the input gradient of 1B/I0 from rank 1, which has not computed it",
     .errors = 0, .blocked = "0 1", .cycle = "0 1",
     .fixed = "0F0,0B0,0F1,0B1\n1F0,1B0,1F1,1B1\n"},
    /* an overlapped cell runs its parts together, so one cannot feed the other */
    {.fmt = "needs the activation of %dF%d from rank %d, which comes later on this same rank",
     .sem = "rendezvous", .text = "(0F0;1F0)OVERLAP_F_B\n", WAITS(0, 1, "1F0", 0),
     .message = "needs the activation of 0F0 from rank 0, which comes later on this same rank",
     .errors = 0, .blocked = "0", .cycle = "0", .fixed = "0F0,1F0\n"},
    {.fmt = "needs the input gradient of %dB/I%d from rank %d, which comes later on this same "
            "rank",
     .sem = "eager:1M", .text = "0F0,1F0,(1B0;0B0)OVERLAP_F_B\n", WAITS(0, 3, "0B0", 0),
     .message = "needs the input gradient of 1B/I0 from rank 0, which comes later on this same "
                "rank",
     .errors = 0, .blocked = "0", .cycle = "0", .fixed = "0F0,1F0,1B0,0B0\n"},
};
/* clang-format on */

#define NROWS (sizeof rows / sizeof rows[0])

/* ---- matching text against a format ------------------------------------------------ */

/* Length of the printf conversion at p (%d, %lld, %s, %g), or 0. */
static size_t conversion_at(const char *p) {
    if (p[0] != '%') return 0;
    if (p[1] == 'd' || p[1] == 's' || p[1] == 'g') return 2;
    if (p[1] == 'l' && p[2] == 'l' && p[3] == 'd') return 4;
    return 0;
}

/* Whether text matches pattern whole, each conversion in the pattern
 * standing for any run of characters. */
static int wild_match(const char *pattern, const char *text) {
    size_t n = conversion_at(pattern);
    if (n) {
        for (const char *t = text;; t++) {
            if (wild_match(pattern + n, t)) return 1;
            if (!*t) return 0;
        }
    }
    if (!*pattern) return !*text;
    return *pattern == *text && wild_match(pattern + 1, text + 1);
}

/* Whether pattern matches somewhere inside text. */
static int wild_find(const char *pattern, const char *text) {
    char anywhere[1024];
    snprintf(anywhere, sizeof anywhere, "%%s%s%%s", pattern);
    return wild_match(anywhere, text);
}

/* ---- checking a row ------------------------------------------------------------- */

/* Parses text (t.ppv when native, else t.csv) and checks it under sem with
 * the default options; NULL with the reason in why when either fails. */
static ppv_check_report *check_text(const char *text, const char *sem, char *why, size_t n) {
    const char *name = strncmp(text, "ppv-schedule", 12) == 0 ? "t.ppv" : "t.csv";
    ppv_schedule *s = NULL;
    char err[512] = "";
    if (ppv_schedule_parse_text(text, strlen(text), name, PPV_DIALECT_AUTO, &s, err, sizeof err)) {
        snprintf(why, n, "does not parse: %s", err);
        return NULL;
    }
    ppv_check_options o = ppv_check_defaults();
    ppv_check_report *rep = NULL;
    if (ppv_semantics_parse(sem, &o.sem) != 0)
        snprintf(why, n, "bad semantics '%s'", sem);
    else if (ppv_schedule_check(s, &o, &rep, err, sizeof err) != 0)
        snprintf(why, n, "check failed: %s", err);
    ppv_schedule_free(s);
    return rep;
}

/* The ranks of waits, as "0 1". */
static void ranks_of(const ppv_wait *w, int32_t n, char *buf, size_t cap) {
    size_t at = 0;
    buf[0] = 0;
    for (int32_t k = 0; k < n && at < cap; k++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%d", k ? " " : "", w[k].rank);
}

/* Prints rep's verdict, its first 20 errors and its blocked ranks. */
static void print_report(const ppv_check_report *rep) {
    fprintf(stderr, "    ok=%d deadlock=%d errors_total=%lld\n", rep->ok, rep->deadlock,
            (long long)rep->errors_total);
    for (int32_t k = 0; k < rep->nerrors && k < 20; k++)
        fprintf(stderr, "    error rank %d index %d '%s': %s\n", rep->errors[k].rank,
                rep->errors[k].index, rep->errors[k].action, rep->errors[k].message);
    for (int32_t k = 0; k < rep->nblocked; k++)
        fprintf(stderr, "    blocked rank %d index %d '%s' waits for %d: %s\n",
                rep->blocked[k].rank, rep->blocked[k].index, rep->blocked[k].action,
                rep->blocked[k].waits_for, rep->blocked[k].reason);
}

/* Whether rep holds row r's problem, exactly where the row says. */
static int holds_problem(const row *r, const ppv_check_report *rep) {
    if (r->wait) {
        for (int32_t k = 0; k < rep->nblocked; k++) {
            const ppv_wait *w = &rep->blocked[k];
            if (w->rank == r->rank && w->index == r->index && strcmp(w->action, r->action) == 0 &&
                w->waits_for == r->waits_for && strcmp(w->reason, r->message) == 0)
                return 1;
        }
        return 0;
    }
    for (int32_t k = 0; k < rep->nerrors; k++) {
        const ppv_problem *e = &rep->errors[k];
        if (e->rank == r->rank && e->index == r->index && strcmp(e->action, r->action) == 0 &&
            strcmp(e->message, r->message) == 0)
            return 1;
    }
    return 0;
}

/* Checks row r; 0 when it holds, else -1 with the reason in why. */
static int row_holds(const row *r, char *why, size_t n) {
    if (!wild_match(r->fmt, r->message)) {
        snprintf(why, n, "the expected message does not read as its format");
        return -1;
    }
    ppv_check_report *rep = check_text(r->text, r->sem, why, n);
    if (!rep) return -1;
    char blocked[64], cycle[64];
    ranks_of(rep->blocked, rep->nblocked, blocked, sizeof blocked);
    ranks_of(rep->cycle, rep->ncycle, cycle, sizeof cycle);
    int rc = -1;
    if (rep->ok)
        snprintf(why, n, "the report is ok");
    else if (!holds_problem(r, rep))
        snprintf(why, n, "the report lacks the %s at rank %d index %d",
                 r->wait ? "blocked rank" : "error", r->rank, r->index);
    else if (rep->errors_total != r->errors)
        snprintf(why, n, "%lld errors, not %lld", (long long)rep->errors_total,
                 (long long)r->errors);
    else if (rep->deadlock != (r->blocked != NULL))
        snprintf(why, n, "deadlock is %d", rep->deadlock);
    else if (r->blocked && strcmp(blocked, r->blocked) != 0)
        snprintf(why, n, "blocked ranks '%s', not '%s'", blocked, r->blocked);
    else if (r->blocked && strcmp(cycle, r->cycle) != 0)
        snprintf(why, n, "cycle '%s', not '%s'", cycle, r->cycle);
    else
        rc = 0;
    if (rc) print_report(rep);
    ppv_check_report_free(rep);
    return rc;
}

/* ---- the tests ---------------------------------------------------------------------- */

static void test_every_row_reports_its_problem_where_it_says(void **state) {
    (void)state;
    int failed = 0;
    for (size_t k = 0; k < NROWS; k++) {
        char why[512];
        if (row_holds(&rows[k], why, sizeof why) == 0) continue;
        fprintf(stderr, "row %zu (%s, %s): %s\n  want: %s\n", k, rows[k].sem, rows[k].fmt, why,
                rows[k].message);
        failed++;
    }
    assert_int_equal(failed, 0);
}

/* The positive controls: a row's schedule mended checks clean under the
 * row's semantics, so the rows fail for the reason they name. */
static void test_every_mended_schedule_checks_ok(void **state) {
    (void)state;
    int failed = 0, controls = 0;
    for (size_t k = 0; k < NROWS; k++) {
        if (!rows[k].fixed) continue;
        controls++;
        char why[512] = "";
        ppv_check_report *rep = check_text(rows[k].fixed, rows[k].sem, why, sizeof why);
        if (rep && rep->ok && rep->errors_total == 0 && !rep->deadlock) {
            ppv_check_report_free(rep);
            continue;
        }
        fprintf(stderr, "row %zu mended (%s): %s\n", k, rows[k].sem, rep ? "not ok" : why);
        if (rep) print_report(rep);
        ppv_check_report_free(rep);
        failed++;
    }
    assert_int_equal(failed, 0);
    assert_true(controls >= 40); /* most rows have one */
}

/* Every message check.c writes has a row, and every row names a message of
 * the list. A new message in check.c: add it to check_messages and a row. */
static void test_every_message_has_a_row(void **state) {
    (void)state;
    int missing = 0;
    for (size_t m = 0; m < NMESSAGES; m++) {
        int rows_for = 0;
        for (size_t k = 0; k < NROWS; k++)
            rows_for += strcmp(rows[k].fmt, check_messages[m]) == 0;
        if (!rows_for) {
            fprintf(stderr, "no row for \"%s\"\n", check_messages[m]);
            missing++;
        }
    }
    for (size_t k = 0; k < NROWS; k++) {
        int listed = 0;
        for (size_t m = 0; m < NMESSAGES; m++)
            listed |= strcmp(rows[k].fmt, check_messages[m]) == 0;
        if (!listed) {
            fprintf(stderr, "row %zu's message is not in check_messages: \"%s\"\n", k, rows[k].fmt);
            missing++;
        }
    }
    assert_int_equal(missing, 0);
}

/* Calls fn on each string literal of C source src, adjacent literals
 * joined, comments and character constants skipped. */
static void each_literal(const char *src, void (*fn)(const char *lit, void *ctx), void *ctx) {
    char lit[2048];
    const char *p = src;
    while (*p) {
        if (p[0] == '/' && p[1] == '*') {
            const char *e = strstr(p + 2, "*/");
            p = e ? e + 2 : p + strlen(p);
        } else if (p[0] == '/' && p[1] == '/') {
            while (*p && *p != '\n')
                p++;
        } else if (*p == '\'') {
            for (p++; *p && *p != '\''; p++)
                if (*p == '\\' && p[1]) p++;
            if (*p) p++;
        } else if (*p == '"') {
            size_t n = 0;
            while (*p == '"') {
                for (p++; *p && *p != '"'; p++) {
                    if (*p == '\\' && p[1] && n < sizeof lit - 1) lit[n++] = *p++;
                    if (n < sizeof lit - 1) lit[n++] = *p;
                }
                if (*p) p++;
                const char *q = p;
                while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r')
                    q++;
                if (*q == '"') p = q;
            }
            lit[n] = 0;
            fn(lit, ctx);
        } else {
            p++;
        }
    }
}

typedef struct scan {
    int literals, unknown;
} scan;

/* Counts lit, and reports it when no listed message holds it. A literal
 * that is only part of a message (a phrase passed to %s, a mismatch
 * reason) need only occur inside one, so a new message that only repeats
 * a listed phrase passes unseen. */
static void judge_literal(const char *lit, void *ctx) {
    scan *sc = ctx;
    sc->literals++;
    for (size_t m = 0; m < sizeof not_report_messages / sizeof not_report_messages[0]; m++)
        if (strcmp(lit, not_report_messages[m]) == 0) return;
    for (size_t m = 0; m < NMESSAGES; m++)
        if (wild_find(lit, check_messages[m])) return;
    for (size_t m = 0; m < sizeof unreachable_messages / sizeof unreachable_messages[0]; m++)
        if (wild_find(lit, unreachable_messages[m])) return;
    fprintf(stderr,
            "engine/check/check.c writes \"%s\", which check_messages lacks: list it and add a "
            "row\n",
            lit);
    sc->unknown++;
}

/* A message added to check.c without a row fails here: every string
 * literal in check.c is a listed message, part of one, or listed as no
 * report message. */
static void test_check_c_writes_no_message_the_list_lacks(void **state) {
    (void)state;
    char *src = slurp(PPV_TEST_DATA "/../../engine/check/check.c");
    scan sc = {0, 0};
    each_literal(src, judge_literal, &sc);
    free(src);
    assert_true(sc.literals > 60);
    assert_int_equal(sc.unknown, 0);
}

/* The matcher the coverage rests on: conversions stand for any text, the
 * rest must be equal. */
static void test_wild_match_reads_conversions_as_any_text(void **state) {
    (void)state;
    assert_true(wild_match("duplicate W%s", "duplicate W (t.csv:1:1)"));
    assert_true(wild_match("rank %d of %lld", "rank 3 of 12"));
    assert_true(wild_match("%s%s", ""));
    assert_false(wild_match("duplicate W%s", "duplicate SEND_F (t.csv:1:1)"));
    assert_false(wild_match("rank %d.", "rank 3"));
    assert_true(wild_find("kinds differ", COLL_PAIR "kinds differ"));
    assert_true(
        wild_find("no %s on rank %d ever matches it", "no send on rank %d ever matches it"));
    assert_false(wild_find("no message at all", "no send on rank %d ever matches it"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wild_match_reads_conversions_as_any_text),
        cmocka_unit_test(test_every_row_reports_its_problem_where_it_says),
        cmocka_unit_test(test_every_mended_schedule_checks_ok),
        cmocka_unit_test(test_every_message_has_a_row),
        cmocka_unit_test(test_check_c_writes_no_message_the_list_lacks),
    };
    return cmocka_run_group_tests(tests, NULL, tmp_cleanup);
}
