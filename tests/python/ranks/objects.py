"""send_object_list and recv_object_list, for tests/python/test_dist.py:
each is two messages (the pickled sizes, then the objects), each received
as torch receives it."""
import ppv.dist as dist


def relay(rank, size):
    """Rank 1 to whoever listens, rank 0 on to rank 2: passes."""
    objs = [None, None]
    if rank == 1:
        dist.send_object_list([{"shape": (2, 8)}, "float64"], dst=0)
    elif rank == 0:
        assert dist.recv_object_list(objs) == 1
        dist.send_object_list(objs, dst=2)
    else:
        assert dist.recv_object_list(objs, src=0) == 0
        assert objs == [{"shape": (2, 8)}, "float64"], objs


def two_senders_at_once(rank, size):
    """Ranks 1 and 2 send at once and rank 0 takes each from any rank: in
    some orders the sizes come from one and the objects from the other
    (three objects that pickle to 24 bytes, as long as the sizes message,
    so the two fit each other's buffers and torch's own check names it)."""
    if rank == 0:
        for _ in range(2):
            objs = [None] * 3
            dist.recv_object_list(objs)
    else:
        dist.send_object_list([1000 * rank, rank, None], dst=0)
