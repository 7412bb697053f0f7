"""Programs that complete under real torch.distributed with gloo, each a
function main(rank, world_size) of 3 ranks that checks every value it
gets. tests/python/test_torch_corpus.py runs each under torch (3
processes, gloo, env:// rendezvous) and under `ppv fuzz py` with every
strategy: ppv must never call one of them a failure (a false alarm).

The same text runs both ways: under ppv (PPV_CORPUS_BACKEND unset) the
module is ppv.dist, under torch it is torch.distributed; the payloads are
torch CPU tensors either way. The first three are the programs ppv once
called deadlocks (issue 47).
"""
import itertools
import os

import torch

if os.environ.get("PPV_CORPUS_BACKEND") == "torch":
    import torch.distributed as dist
else:
    import ppv.dist as dist

PROGRAMS = ["isend_then_broadcast", "two_isends_then_recv_any", "wait_one_of_two",
            "batch_ring", "reductions_of_every_dtype", "gathers_and_scatters",
            "object_collectives", "a_group_and_its_non_member", "recv_any_names_the_sender",
            "module_counter_for_call_ids", "parallel_state_globals", "tags_keep_their_own_order",
            "irecv_from_any_rank"]


def _init():
    """Each program starts as torch code does (under torch the runner has
    initialized the group once for all of them)."""
    if not dist.is_initialized():
        dist.init_process_group("gloo")


def isend_then_broadcast(rank, size):
    """An isend stays pending across a collective; its wait comes after."""
    _init()
    if rank == 0:
        w = dist.isend(torch.arange(4, dtype=torch.float32), 1)
        b = torch.zeros(1)
        dist.broadcast(b, 2)
        w.wait()
        assert b.item() == 7.0
    else:
        b = torch.tensor([7.0 if rank == 2 else 0.0])
        dist.broadcast(b, 2)
        assert b.item() == 7.0
        if rank == 1:
            x = torch.zeros(4)
            dist.recv(x, 0)
            assert x.tolist() == [0.0, 1.0, 2.0, 3.0]


def two_isends_then_recv_any(rank, size):
    """Stage 0 with D_in = 2: two envelopes in flight, then whichever
    result comes back first."""
    _init()
    if rank == 0:
        works = [dist.isend(torch.tensor([float(p)]), p) for p in (1, 2)]
        got = set()
        for _ in range(2):
            r = torch.zeros(1)
            src = dist.recv(r, src=None)
            assert r.item() == 10.0 * src
            got.add(src)
        assert got == {1, 2}
        for w in works:
            w.wait()
    else:
        r = torch.zeros(1)
        dist.recv(r, 0)
        assert r.item() == float(rank)
        dist.send(r * 10, 0)


def wait_one_of_two(rank, size):
    """wait() on one of two pending receives returns when that one is
    matched; the other completes later."""
    _init()
    if rank == 0:
        a, b = torch.zeros(1), torch.zeros(1)
        wa = dist.irecv(a, 1)
        wb = dist.irecv(b, 2)
        wb.wait()
        assert b.item() == 2.0
        dist.send(torch.tensor([5.0]), 1)  # rank 1 sends only after this
        wa.wait()
        assert a.item() == 1.0
    elif rank == 1:
        t = torch.zeros(1)
        dist.recv(t, 0)
        assert t.item() == 5.0
        dist.send(torch.tensor([1.0]), 0)
    else:
        dist.send(torch.tensor([2.0]), 0)


def batch_ring(rank, size):
    """batch_isend_irecv around the ring, every rank at once."""
    _init()
    out = torch.full((3,), float(rank))
    got = torch.zeros(3)
    ops = [dist.P2POp(dist.isend, out, (rank + 1) % size),
           dist.P2POp(dist.irecv, got, (rank - 1) % size)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    assert got.tolist() == [float((rank - 1) % size)] * 3


def reductions_of_every_dtype(rank, size):
    """The reductions gloo has, on the tensor's own dtype."""
    _init()
    x = torch.tensor([rank + 1, 1 << rank], dtype=torch.int64)
    dist.all_reduce(x)
    assert x.tolist() == [6, 7]
    x = torch.tensor([rank, 10 - rank], dtype=torch.int64)
    dist.all_reduce(x, op=dist.ReduceOp.MAX)
    assert x.tolist() == [2, 10]
    x = torch.tensor([1 << rank], dtype=torch.int64)
    dist.all_reduce(x, op=dist.ReduceOp.BOR)
    assert x.item() == 7
    x = torch.tensor([rank - 1], dtype=torch.int32)
    dist.all_reduce(x, op=dist.ReduceOp.MIN)
    assert x.item() == -1 and x.dtype == torch.int32
    x = torch.tensor([0.5 * (rank + 1)], dtype=torch.float32)
    dist.all_reduce(x, op=dist.ReduceOp.PRODUCT)
    assert x.item() == 0.75
    x = torch.tensor([0.1 * rank], dtype=torch.float64)
    dist.all_reduce(x)
    assert abs(x.item() - 0.3) < 1e-12
    w = dist.all_reduce(torch.ones(2), async_op=True)
    w.wait()
    x = torch.tensor([float(rank)])
    dist.reduce(x, dst=1)
    if rank == 1:
        assert x.item() == 3.0


def gathers_and_scatters(rank, size):
    _init()
    mine = torch.tensor([10 * rank], dtype=torch.int32)
    every = [torch.zeros(1, dtype=torch.int32) for _ in range(size)]
    dist.all_gather(every, mine)
    assert [e.item() for e in every] == [0, 10, 20]
    g = [torch.zeros(2) for _ in range(size)] if rank == 2 else None
    dist.gather(torch.tensor([float(rank), 1.0]), g, dst=2)
    if rank == 2:
        assert [t.tolist() for t in g] == [[0.0, 1.0], [1.0, 1.0], [2.0, 1.0]]
    out = torch.zeros(2)
    parts = [torch.tensor([float(k), -float(k)]) for k in range(size)] if rank == 0 else None
    dist.scatter(out, parts, src=0)
    assert out.tolist() == [float(rank), -float(rank)]
    a2a_in = torch.arange(3, dtype=torch.float32) + 10 * rank
    a2a_out = torch.zeros(3)
    dist.all_to_all_single(a2a_out, a2a_in)
    assert a2a_out.tolist() == [float(10 * k + rank) for k in range(size)]
    dist.barrier()
    dist.monitored_barrier()


def object_collectives(rank, size):
    _init()
    objs = [{"chunk": 3, "epoch": 1}, "stop"] if rank == 1 else [None, None]
    dist.broadcast_object_list(objs, src=1)
    assert objs == [{"chunk": 3, "epoch": 1}, "stop"]
    everyone = [None] * size
    dist.all_gather_object(everyone, ("rank", rank, "x" * rank))
    assert everyone == [("rank", k, "x" * k) for k in range(size)]
    got = [None] * size if rank == 0 else None
    dist.gather_object({"r": rank}, got, dst=0)
    if rank == 0:
        assert got == [{"r": 0}, {"r": 1}, {"r": 2}]
    out = [None]
    dist.scatter_object_list(out, [f"to {k}" for k in range(size)] if rank == 2 else None,
                             src=2)
    assert out == [f"to {rank}"]


def a_group_and_its_non_member(rank, size):
    """Every rank calls new_group; a rank outside it calling a collective
    on it returns at once."""
    _init()
    mesh = dist.new_group([1, 2])
    assert dist.get_process_group_ranks(mesh) == [1, 2]
    x = torch.tensor([float(rank)])
    dist.all_reduce(x, group=mesh)
    if rank == 0:
        assert x.item() == 0.0  # untouched: not a member
    else:
        assert x.item() == 3.0
        assert dist.get_global_rank(mesh, 0) == 1
    b = torch.tensor([9.0 if rank == 2 else 0.0])
    dist.broadcast(b, src=2, group=mesh)  # src is the global rank
    assert b.item() == (0.0 if rank == 0 else 9.0)
    dist.barrier()
    assert dist.get_world_size() == size and dist.get_rank() == rank


def recv_any_names_the_sender(rank, size):
    _init()
    if rank == 0:
        seen = []
        for _ in range(size - 1):
            t = torch.zeros(1, dtype=torch.int64)
            src = dist.recv(t, src=None)
            assert t.item() == 100 + src
            seen.append(src)
        assert sorted(seen) == [1, 2]
    else:
        dist.send(torch.tensor([100 + rank], dtype=torch.int64), 0)


_CALL_IDS = itertools.count()  # module state: each process has its own


def module_counter_for_call_ids(rank, size):
    """Call ids drawn from a module-level counter, as a control plane
    numbers its envelopes: each process starts at 0 (ppv gave the ranks one
    counter when they were threads of one interpreter)."""
    _init()
    first = next(_CALL_IDS)
    assert first == 0, f"rank {rank}: the first call id is {first}, not 0"
    ids = torch.tensor([float(next(_CALL_IDS))])
    dist.all_reduce(ids)
    assert ids.item() == size, ids.item()


# Megatron's parallel_state keeps its groups in module globals, set once
_PIPELINE_GROUP = None
_PIPELINE_RANK = None


def _initialize_model_parallel():
    global _PIPELINE_GROUP, _PIPELINE_RANK
    assert _PIPELINE_GROUP is None, "pipeline model parallel group is already initialized"
    _PIPELINE_GROUP = dist.new_group([0, 1, 2])
    _PIPELINE_RANK = dist.get_rank(_PIPELINE_GROUP)


def parallel_state_globals(rank, size):
    """The groups and the rank in module globals (parallel_state's way):
    each process initializes its own once."""
    _init()
    _initialize_model_parallel()
    right, left = (_PIPELINE_RANK + 1) % size, (_PIPELINE_RANK - 1) % size
    x = torch.zeros(1)
    if _PIPELINE_RANK == 0:
        dist.send(torch.tensor([1.0]), right, group=_PIPELINE_GROUP)
        dist.recv(x, left, group=_PIPELINE_GROUP)
        assert x.item() == size, x.item()
    else:
        dist.recv(x, left, group=_PIPELINE_GROUP)
        dist.send(x + 1, right, group=_PIPELINE_GROUP)


def tags_keep_their_own_order(rank, size):
    """A receive takes its sender's next message with its tag: the one
    posted first is received last."""
    _init()
    if rank == 0:
        late = dist.isend(torch.tensor([7.0]), 1, tag=7)
        dist.send(torch.tensor([3.0]), 1, tag=3)
        late.wait()
    elif rank == 1:
        b = torch.zeros(1)
        dist.recv(b, 0, tag=3)
        assert b.item() == 3.0, b
        dist.recv(b, 0, tag=7)
        assert b.item() == 7.0, b


def irecv_from_any_rank(rank, size):
    """irecv(src=None) is posted, other work goes on, and wait() takes
    whichever message is there first; source_rank() names its sender."""
    _init()
    if rank == 0:
        first = torch.zeros(1)
        w = dist.irecv(first, src=None)
        b = torch.tensor([5.0])
        dist.broadcast(b, 0)
        w.wait()
        src = w.source_rank()
        assert first.item() == 10.0 * src, (first, src)
        second = torch.zeros(1)
        other = dist.recv(second, src=None)
        assert {src, other} == {1, 2} and second.item() == 10.0 * other
    else:
        b = torch.zeros(1)
        dist.broadcast(b, 0)
        assert b.item() == 5.0
        dist.send(torch.tensor([10.0 * rank]), 0)


# a rank's own threads: under ppv they take turns (ranks as processes)
PROGRAMS += ["a_sender_thread_and_recv_any", "a_queue_feeds_a_sender_thread",
             "threads_hand_over_with_events_and_locks"]


def a_sender_thread_and_recv_any(rank, size):
    """Stage 0 as a control plane writes it with threads: a thread sends
    the envelopes (blocking sends), the main thread takes the results from
    whichever rank answers (recv from any); each other rank answers its
    own. Under ppv the rank's threads take turns, and neither waits for
    the other's call."""
    import threading
    _init()
    if rank == 0:
        def send_envelopes():
            for k in range(4):
                dist.send(torch.tensor([float(k)]), 1 + k % 2)
        t = threading.Thread(target=send_envelopes, name="sender")
        t.start()
        got = []
        for _ in range(4):
            r = torch.zeros(1)
            src = dist.recv(r, src=None)
            assert r.item() % 2 == src - 1 and r.item() >= 100, (r, src)
            got.append(r.item())
        t.join()
        assert sorted(got) == [100.0, 101.0, 102.0, 103.0], got
    else:
        for _ in range(2):
            e = torch.zeros(1)
            dist.recv(e, 0)
            dist.send(e + 100, 0)


def a_queue_feeds_a_sender_thread(rank, size):
    """The main thread puts work on a bounded queue that a worker thread
    drains into sends; a None ends the worker. The receiver checks the
    order."""
    import queue
    import threading
    _init()
    if rank == 0:
        q = queue.Queue(maxsize=1)

        def drain():
            while True:
                item = q.get()
                if item is None:
                    return
                dist.send(torch.tensor([item]), 2)
        t = threading.Thread(target=drain, name="worker")
        t.start()
        for k in range(5):
            q.put(float(k))
        q.put(None)
        t.join()
    elif rank == 2:
        b = torch.zeros(1)
        for k in range(5):
            dist.recv(b, 0)
            assert b.item() == float(k), (b, k)


def threads_hand_over_with_events_and_locks(rank, size):
    """A thread waits on an event the main thread sets once its receive
    is in; a lock guards the count both add to; the thread then answers
    (and waits, with a timeout, for a stop that never comes)."""
    import threading
    _init()
    if rank == 1:
        ready, stop, lock = threading.Event(), threading.Event(), threading.Lock()
        count = [0]
        box = torch.zeros(1)

        def answer():
            assert ready.wait(), "ready"
            with lock:
                count[0] += 1
            dist.send(box * 2, 2)
            assert not stop.wait(0.05)
        t = threading.Thread(target=answer, name="answer")
        t.start()
        dist.recv(box, 0)
        with lock:
            count[0] += 1
        ready.set()
        t.join()
        assert count[0] == 2, count
    elif rank == 0:
        dist.send(torch.tensor([21.0]), 1)
    else:
        b = torch.zeros(1)
        dist.recv(b, 1)
        assert b.item() == 42.0, b


PROGRAMS += ["objects_point_to_point"]
SINCE_2X = {"objects_point_to_point"}  # send_object_list and recv_object_list: torch 2.x


def objects_point_to_point(rank, size):
    """send_object_list/recv_object_list, as PyTorch's pipeline stages pass
    their shapes: rank 1 to whoever listens (rank 0, from any rank), rank 0
    on to rank 2, rank 2 back to rank 1."""
    _init()
    objs = [None, None]
    if rank == 1:
        dist.send_object_list([{"shape": (2, 8)}, "float64"], dst=0)
        dist.recv_object_list(objs, src=2)
        assert objs == [("back", 2), None], objs
    elif rank == 0:
        assert dist.recv_object_list(objs) == 1
        assert objs == [{"shape": (2, 8)}, "float64"], objs
        dist.send_object_list(objs + [rank], dst=2)
    else:
        three = [None] * 3
        assert dist.recv_object_list(three, src=0) == 0
        assert three == [{"shape": (2, 8)}, "float64", 0], three
        dist.send_object_list([("back", 2), None], dst=1)


def run_all_under_torch(rank, size):
    """One process of the torch run: every program in turn, a barrier
    between them."""
    dist.init_process_group("gloo", rank=rank, world_size=size)
    for name in PROGRAMS:
        if name in SINCE_2X and not hasattr(dist, "send_object_list"):
            continue  # torch 1.13 has no point-to-point object calls (ppv.dist has)
        globals()[name](rank, size)
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":  # one rank of the torch run: RANK, WORLD_SIZE, MASTER_* set
    run_all_under_torch(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
    print("done")
