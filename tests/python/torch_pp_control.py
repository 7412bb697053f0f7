"""A PP inference control plane written against torch.distributed, run as a
script: by torchrun (3 processes, gloo) and, unchanged, by `ppv fuzz py
tests/python/torch_pp_control.py -n 3`. Rank 0 is stage 0, ranks 1 and 2
the tensor-parallel mesh (1 its leader). Stage 0 sends each chunk's
envelope (a header, then the payload) to the leader with isend, at most
D_IN in flight, and takes results and the worker's telemetry as they come
with recv(src=None), telling them apart by sender; at most D_OUT results
wait to be decoded. A hard cut drains the old epoch first. The mesh
broadcasts the envelope on its group and sums its halves with all_reduce;
the worker sends a heartbeat (telemetry) after each chunk and keeps its KV
cache, cleared at a cut, in module state.

PPV_PLANE_VARIANT seeds one bug (tests/python/test_torch_corpus.py states
the runs each strategy needs to find it):
  fm02           the worker makes one all_reduce more on the chunk after the cut
  fm03           the worker skips the all_reduce of a flagged chunk
  fm22           the leader sums chunk 3 on the world's group, not the mesh's
  receive_order  stage 0 takes the leader's statistics with recv(src=None),
                 as if only the leader could answer: the worker's last
                 heartbeat may come first
  module_state   the worker's cut assigns its KV cache without `global`, so
                 the module's cache is never cleared
"""
import os

import torch
import torch.distributed as dist

CHUNKS, D_IN, D_OUT, CUT, FLAGGED, WINDOW = 5, 2, 2, 3, 1, 3
WIDTH, HEADER = 4, 4          # floats of a payload; of a header (call_id, epoch, flag, stop)
LEADER, WORKER = 1, 2
VARIANT = os.environ.get("PPV_PLANE_VARIANT", "clean")

KV = []                       # the worker's cache of chunks: module state, one a process


def stage0():
    results, beats, in_flight, works, epoch = [], 0, [], [], 0

    def take():
        nonlocal beats
        while True:           # results and telemetry, as they come
            msg = torch.zeros(HEADER)
            src = dist.recv(msg, src=None)
            if src == WORKER:
                beats += 1
                continue
            call_id, ep = int(msg[0]), int(msg[1])
            want = in_flight.pop(0)
            if (call_id, ep) != want:
                raise RuntimeError(f"result {call_id} of epoch {ep} came for {want}")
            results.append(float(msg[2]))
            return

    for chunk in range(CHUNKS):
        if chunk == CUT:      # a hard cut: the old epoch's results first
            while in_flight:
                take()
            epoch += 1
        while len(in_flight) >= min(D_IN, D_OUT):
            take()
        flag = 1.0 if chunk == FLAGGED else 0.0
        works.append(dist.isend(torch.tensor([chunk, epoch, flag, 0.0]), LEADER))
        works.append(dist.isend(torch.full((WIDTH,), float(chunk + 1)), LEADER))
        in_flight.append((chunk, epoch))
    while in_flight:
        take()
    for w in works:
        w.wait()
    dist.send(torch.tensor([-1.0, epoch, 0, 1]), LEADER)   # STOP
    stats = torch.zeros(HEADER)
    if VARIANT == "receive_order":
        dist.recv(stats, src=None)   # the bug: whoever answers first
    else:                            # the statistics, and every heartbeat left (one a chunk, one last)
        got = False
        while not got or beats < CHUNKS + 1:
            msg = torch.zeros(HEADER)
            if dist.recv(msg, src=None) == WORKER:
                beats += 1
            else:
                stats, got = msg, True
    if int(stats[0]) != CHUNKS:
        raise RuntimeError(f"the leader served {int(stats[0])} chunks, not {CHUNKS}")
    want = [float((c + 1) * WIDTH) for c in range(CHUNKS)]
    if results != want:
        raise RuntimeError(f"results {results} are not {want}")


def mesh_step(rank, header, mesh):
    chunk = int(header[0])
    payload = torch.zeros(WIDTH)
    if rank == LEADER:
        dist.recv(payload, 0)
    dist.broadcast(payload, LEADER, group=mesh)
    half = payload[:WIDTH // 2].sum() if rank == LEADER else payload[WIDTH // 2:].sum()
    half = half.reshape(1).contiguous()
    skip = VARIANT == "fm03" and rank == WORKER and float(header[2]) == 1.0
    wrong = VARIANT == "fm22" and rank == LEADER and chunk == 3
    if not skip:
        dist.all_reduce(half, group=dist.group.WORLD if wrong else mesh)
    if VARIANT == "fm02" and rank == WORKER and chunk == CUT:
        dist.all_reduce(torch.zeros(1), group=mesh)   # a generator call the leader does not make
    return float(half[0])


def leader(mesh):
    served = 0
    while True:
        header = torch.zeros(HEADER)
        dist.recv(header, 0)
        dist.broadcast(header, LEADER, group=mesh)
        if float(header[3]) == 1.0:
            break
        value = mesh_step(LEADER, header, mesh)
        served += 1
        dist.send(torch.tensor([float(header[0]), float(header[1]), value, 0.0]), 0)
    dist.send(torch.tensor([float(served), 0, 0, 0]), 0)


def cut_cache():
    global KV
    KV = []


def cut_cache_without_global():
    KV = []  # noqa: F841 - the bug: a local; the module's cache stays as it was


def worker(mesh):
    epoch = 0
    while True:
        header = torch.zeros(HEADER)
        dist.broadcast(header, LEADER, group=mesh)
        if float(header[3]) == 1.0:
            break
        if int(header[1]) != epoch:
            epoch = int(header[1])
            cut_cache_without_global() if VARIANT == "module_state" else cut_cache()
        KV.append(int(header[0]))
        if len(KV) > WINDOW:
            raise RuntimeError(f"the KV cache holds {len(KV)} chunks, more than the window "
                               f"of {WINDOW}")
        mesh_step(WORKER, header, mesh)
        dist.send(torch.tensor([7.0, float(header[0]), 0, 0]), 0)   # telemetry: a heartbeat
    dist.send(torch.tensor([7.0, -1.0, 0, 0]), 0)                    # the last one


def main():
    dist.init_process_group("gloo")
    mesh = dist.new_group([LEADER, WORKER])
    rank = dist.get_rank()
    if rank == 0:
        stage0()
    elif rank == LEADER:
        leader(mesh)
    else:
        worker(mesh)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
