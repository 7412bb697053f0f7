"""A PP inference control plane written to the contract, on ppv.dist: rank 0
is stage 0, ranks 1 and 2 the tensor-parallel mesh (1 its leader). Stage 0
sends each chunk's envelope (a header, then the payload) to the leader with
isend, at most D_IN in flight, and takes the results back in order, at most
D_OUT of them waiting to be decoded; a hard cut drains every result of the
old epoch before the new epoch's first envelope. The leader broadcasts each
envelope on the mesh's group; both mesh ranks compute their half and sum it
with all_reduce on the mesh's group; the leader sends the result. A STOP
envelope ends it: the leader answers with its statistics, the worker with
its heartbeat.

`clean` keeps the contract. Each other function is the same plane with one
of the contract's failure modes seeded (tests/python/test_dist.py runs them
under `ppv fuzz py` and states the runs each strategy needs):

  fm02           the worker makes one generator call (all_reduce) more than
                 the leader on the chunk after the cut (a call-count mismatch)
  fm03           the worker skips the all_reduce of a flagged chunk (a
                 collective gated by a flag one rank reads differently)
  fm04           the leader throws after an envelope's header, before its
                 payload
  fm22           the leader sums chunk 3 on the world's group, not the mesh's
  fm23           the leader throws after receiving chunk 2's envelope
  receive_order  stage 0 takes the leader's statistics with recv(src=None):
                 when the worker's heartbeat comes first it is taken for them,
                 and the plane deadlocks (only in some interleavings)
"""
import numpy as np

import ppv.dist as dist

CHUNKS, D_IN, D_OUT, CUTS, FLAGGED = 5, 2, 2, (3,), 1
WIDTH = 4                    # floats of a payload
HEADER = 4                   # floats of a header: call_id, epoch, flag, stop
LEADER, WORKER = 1, 2
VARIANT = "clean"


def stage0(size):
    calls_out, results, epoch = [], [], 0
    in_flight = []           # (call_id, epoch) sent, result not yet taken
    pending = []             # the isends' works

    def take_result():
        res = np.zeros(HEADER, dtype=np.float32)
        dist.recv(res, LEADER)
        call_id, ep = int(res[0]), int(res[1])
        want = in_flight.pop(0)
        if (call_id, ep) != want:
            raise RuntimeError(f"result {call_id} of epoch {ep} came for {want}")
        results.append(float(res[2]))
        if len(in_flight) > D_OUT:
            raise RuntimeError("more results waiting than D_OUT")

    for chunk in range(CHUNKS):
        if chunk in CUTS:    # a hard cut: the old epoch's results first
            while in_flight:
                take_result()
            epoch += 1
        while len(in_flight) >= D_IN:
            take_result()
        flag = 1.0 if chunk == FLAGGED else 0.0
        header = np.array([chunk, epoch, flag, 0], dtype=np.float32)
        payload = np.full(WIDTH, chunk + 1, dtype=np.float32)
        pending.append(dist.isend(header, LEADER))
        pending.append(dist.isend(payload, LEADER))
        in_flight.append((chunk, epoch))
        calls_out.append(chunk)
    while in_flight:
        take_result()
    for w in pending:
        w.wait()
    dist.send(np.array([-1, epoch, 0, 1], dtype=np.float32), LEADER)   # STOP
    stats = np.zeros(HEADER, dtype=np.float32)
    if VARIANT == "receive_order":
        dist.recv(stats, src=None)          # the bug: whoever comes first
    else:
        dist.recv(stats, LEADER)
    beat = np.zeros(HEADER, dtype=np.float32)
    dist.recv(beat, WORKER)
    if int(stats[0]) != CHUNKS:
        raise RuntimeError(f"the leader served {int(stats[0])} chunks, not {CHUNKS}")
    # each chunk's result: the mesh's sum of (chunk + 1) * WIDTH over its two halves
    want = [float((c + 1) * WIDTH) for c in range(CHUNKS)]
    if results != want:
        raise RuntimeError(f"results {results} are not {want}")


def mesh_step(rank, header, mesh):
    """Both mesh ranks: the envelope's payload summed over the mesh."""
    chunk = int(header[0])
    payload = np.zeros(WIDTH, dtype=np.float32)
    if rank == LEADER:
        dist.recv(payload, 0)
    dist.broadcast(payload, LEADER, group=mesh)
    half = np.array([payload[:WIDTH // 2].sum() if rank == LEADER else payload[WIDTH // 2:].sum()],
                    dtype=np.float32)
    skip = VARIANT == "fm03" and rank == WORKER and header[2] == 1.0
    wrong = VARIANT == "fm22" and rank == LEADER and chunk == 3
    if not skip:
        dist.all_reduce(half, group=None if wrong else mesh)
    if VARIANT == "fm02" and rank == WORKER and chunk == CUTS[0]:
        extra = np.zeros(1, dtype=np.float32)
        dist.all_reduce(extra, group=mesh)   # a generator call the leader does not make
    return float(half[0])


def leader(mesh):
    served = 0
    while True:
        header = np.zeros(HEADER, dtype=np.float32)
        dist.recv(header, 0)
        if VARIANT == "fm04" and int(header[0]) == 2:
            raise RuntimeError("the payload's shape is wrong")   # after the header
        dist.broadcast(header, LEADER, group=mesh)
        if header[3] == 1.0:
            break
        if VARIANT == "fm23" and int(header[0]) == 2:
            raise RuntimeError("cache epoch went backwards")
        value = mesh_step(LEADER, header, mesh)
        served += 1
        dist.send(np.array([header[0], header[1], value, 0], dtype=np.float32), 0)
    dist.send(np.array([served, 0, 0, 0], dtype=np.float32), 0)


def worker(mesh):
    while True:
        header = np.zeros(HEADER, dtype=np.float32)
        dist.broadcast(header, LEADER, group=mesh)
        if header[3] == 1.0:
            break
        mesh_step(WORKER, header, mesh)
    dist.send(np.array([7, 7, 7, 7], dtype=np.float32), 0)   # the heartbeat


def plane(rank, size):
    dist.init_process_group()
    mesh = dist.new_group([LEADER, WORKER])
    if rank == 0:
        stage0(size)
    elif rank == LEADER:
        leader(mesh)
    else:
        worker(mesh)
    dist.destroy_process_group()


def _variant(name):
    def run(rank, size):
        global VARIANT
        VARIANT = name
        plane(rank, size)
    run.__name__ = name
    return run


clean = _variant("clean")
fm02 = _variant("fm02")
fm03 = _variant("fm03")
fm04 = _variant("fm04")
fm22 = _variant("fm22")
fm23 = _variant("fm23")
receive_order = _variant("receive_order")
