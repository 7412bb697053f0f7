"""ppv.dist: a torch.distributed-shaped module whose every call is a
scheduling point of ppv's mock world, so that a control plane written
against torch.distributed runs under `ppv fuzz py FILE.py:FUNCTION -n RANKS`
(many interleavings, injected faults, deadlocks reported with each rank's
place, replayable traces) by swapping the module:

    import ppv.dist as dist        # instead of: import torch.distributed as dist

    def main(rank, world_size):
        dist.init_process_group()
        if rank == 0:
            dist.send(np.arange(4, dtype=np.float32), dst=1)
        ...

Payloads are numpy arrays (C-contiguous) or, for what is only sent,
bytes; what is received into must be writable (a numpy array or a
bytearray). The subset and how it differs from torch.distributed:

- send, recv (src=None receives from any rank: the scheduler decides which
  message comes first), isend, irecv and Work.wait, broadcast, all_reduce
  (SUM on float32 arrays), all_gather, barrier, new_group, get_rank,
  get_world_size, init_process_group, is_initialized, destroy_process_group.
- isend and irecv are posted with the rank's next blocking call (or its
  wait), together with it, as batch_isend_irecv posts a batch; the data of
  an isend is taken when it is called.
- new_group(ranks) is local (every set of ranks has its communicator from
  the start), so a rank that skips it changes nothing; a collective on a
  group its members do not all join is a deadlock, and ranks that disagree
  on a collective's kind, root or size are a collective mismatch.
- tag is accepted and must be 0; timeouts are ppv's (an idle rank, a hang).
- Under plain Python, outside ppv, every call raises DistError.

Every failed call raises DistError; the run it was in is already a failure
(ppv reports it), and the rank should let the exception end its function.
"""
import sys
import threading

try:
    from ppv import _bridge
except ImportError:  # plain Python: no world to run in
    _bridge = None

__all__ = ["DistError", "ReduceOp", "Work", "Group", "init_process_group", "is_initialized",
           "destroy_process_group", "get_rank", "get_world_size", "new_group", "send", "recv",
           "isend", "irecv", "broadcast", "all_reduce", "all_gather", "barrier"]


class DistError(RuntimeError):
    """A ppv.dist call failed: the world stopped (a deadlock, a hang, another
    rank's failure), a collective mismatched, or the call was wrong."""


class ReduceOp:
    SUM = "sum"


class Group:
    """A set of ranks and its communicator."""

    def __init__(self, ranks, comm):
        self.ranks = tuple(ranks)
        self.comm = comm

    def __repr__(self):
        return f"Group(ranks={list(self.ranks)})"


_local = threading.local()


def _me():
    st = getattr(_local, "state", None)
    if st is None:
        raise DistError("ppv.dist is used outside a rank of `ppv fuzz py` (run the file under "
                        "ppv fuzz py FILE.py:FUNCTION -n RANKS)")
    return st


def _where(depth=2):
    """The caller's place in the user's code: file:line."""
    f = sys._getframe(depth)
    while f is not None and f.f_code.co_filename == __file__:
        f = f.f_back
    if f is None:
        return "?"
    name = f.f_code.co_filename.rsplit("/", 1)[-1]
    return f"{name}:{f.f_lineno}"


def _check(rc, what):
    if rc == 0:
        return
    if rc == _bridge.ABORTED:
        why = "the world stopped (a deadlock, a hang or another rank's failure; ppv reports it)"
    elif rc == _bridge.MISMATCH:
        why = "a collective mismatch (ppv reports it)"
    elif rc == _bridge.STALE:
        why = "this thread's run is over"
    else:
        why = "a wrong peer, group or nesting (ppv reports it)"
    raise DistError(f"{what}: {why}")


def _view(obj, what, writable):
    try:
        mv = memoryview(obj)
    except TypeError:
        raise TypeError(f"{what}: the payload must be a numpy array or bytes, not "
                        f"{type(obj).__name__}") from None
    if not mv.c_contiguous:
        raise TypeError(f"{what}: the payload must be C-contiguous")
    if writable and mv.readonly:
        raise TypeError(f"{what}: the payload is received into, so it must be writable (a numpy "
                        f"array or a bytearray), not {type(obj).__name__}")
    return mv


class _State:
    def __init__(self, rank, size, gen):
        self.rank = rank
        self.size = size
        self.gen = gen
        self.pending = []  # isend/irecv posted with the next blocking call
        self.initialized = False


class Work:
    """What isend and irecv return: wait() completes it."""

    def __init__(self, st):
        self._st = st
        self._done = False

    def is_completed(self):
        return self._done

    def wait(self, timeout=None):
        if not self._done:
            _flush(self._st, _where(), None)
        return True


def _post(st, op):
    """Posts one point-to-point op (inside a group when others go with it)."""
    kind, mv, peer, comm, what = op[:5]
    if kind == "send":
        return _bridge.send(st.gen, st.rank, mv, peer, comm, what)
    return _bridge.recv(st.gen, st.rank, mv, peer, comm, what)


def _flush(st, what, op):
    """Posts the pending isends and irecvs, with op (a blocking send or
    receive, or None) among them, as one group."""
    ops = st.pending
    st.pending = []
    if op is not None:
        ops = ops + [op]
    if not ops:
        return
    if len(ops) == 1:
        _check(_post(st, ops[0]), ops[0][4])
    else:
        _check(_bridge.group_start(st.gen, st.rank, what), what)
        for o in ops:
            _check(_post(st, o), o[4])
        _check(_bridge.group_end(st.gen, st.rank, what), what)
    for o in ops:
        if len(o) > 5 and o[5] is not None:
            o[5]._done = True


def _comm(group):
    return 0 if group is None else group.comm


def _peer(st, peer, group, what):
    if not isinstance(peer, int) or isinstance(peer, bool) or not 0 <= peer < st.size:
        raise ValueError(f"{what}: rank {peer!r} is not one of 0..{st.size - 1}")
    if peer == st.rank:
        raise ValueError(f"{what}: rank {peer} is this rank")
    if group is not None and peer not in group.ranks:
        raise ValueError(f"{what}: rank {peer} is not in {group}")
    return peer


def _tag(tag, what):
    if tag != 0:
        raise ValueError(f"{what}: tags are not modelled (tag={tag!r}); use 0")


# ---- the API ------------------------------------------------------------------------------


def init_process_group(backend=None, init_method=None, world_size=-1, rank=-1, **kwargs):
    st = _me()
    if world_size not in (-1, st.size) or rank not in (-1, st.rank):
        raise ValueError(f"init_process_group: this is rank {st.rank} of {st.size}, not rank "
                         f"{rank} of {world_size}")
    st.initialized = True


def is_initialized():
    st = getattr(_local, "state", None)
    return bool(st and st.initialized)


def destroy_process_group(group=None):
    st = _me()
    _flush(st, _where(), None)
    if group is None:
        st.initialized = False


def get_rank(group=None):
    st = _me()
    if group is None:
        return st.rank
    return group.ranks.index(st.rank) if st.rank in group.ranks else -1


def get_world_size(group=None):
    st = _me()
    return st.size if group is None else len(group.ranks)


def new_group(ranks=None, **kwargs):
    st = _me()
    ranks = sorted(set(range(st.size) if ranks is None else ranks))
    if not ranks or any(not isinstance(r, int) or not 0 <= r < st.size for r in ranks):
        raise ValueError(f"new_group: ranks {ranks!r} are not ranks of 0..{st.size - 1}")
    mask = 0
    for r in ranks:
        mask |= 1 << r
    comm = _bridge.comm_of(mask)
    if comm < 0:
        raise ValueError(f"new_group: groups are made for worlds of at most 6 ranks (this one "
                         f"has {st.size})")
    return Group(ranks, comm)


def send(tensor, dst, group=None, tag=0):
    st = _me()
    what = f"send to {dst} ({_where()})"
    _tag(tag, what)
    _flush(st, what, ("send", _view(tensor, what, False), _peer(st, dst, group, what),
                      _comm(group), what))


def recv(tensor, src=None, group=None, tag=0):
    st = _me()
    what = f"recv from {'any' if src is None else src} ({_where()})"
    _tag(tag, what)
    mv = _view(tensor, what, True)
    if src is not None:
        _flush(st, what, ("recv", mv, _peer(st, src, group, what), _comm(group), what))
        return src
    # from any rank: wait until some member's message is there (the
    # scheduler decides whose comes first), then probe the members in turn
    _flush(st, what, None)
    comm = _comm(group)
    peers = [r for r in (range(st.size) if group is None else group.ranks) if r != st.rank]
    while True:
        _check(_bridge.wait_any(st.gen, st.rank, comm, what), what)
        for p in peers:
            rc, arrived = _bridge.probe(st.gen, st.rank, p, comm, what)
            _check(rc, what)
            if arrived:
                _check(_bridge.recv(st.gen, st.rank, mv, p, comm, what), what)
                return p


def isend(tensor, dst, group=None, tag=0):
    st = _me()
    what = f"isend to {dst} ({_where()})"
    _tag(tag, what)
    data = memoryview(bytes(_view(tensor, what, False)))  # taken now
    w = Work(st)
    st.pending.append(("send", data, _peer(st, dst, group, what), _comm(group), what, w))
    return w


def irecv(tensor, src=None, group=None, tag=0):
    st = _me()
    what = f"irecv from {src} ({_where()})"
    _tag(tag, what)
    if src is None:
        raise ValueError(f"{what}: irecv needs src (recv takes src=None)")
    w = Work(st)
    st.pending.append(("recv", _view(tensor, what, True), _peer(st, src, group, what),
                       _comm(group), what, w))
    return w


def broadcast(tensor, src, group=None, async_op=False):
    st = _me()
    what = f"broadcast from {src} ({_where()})"
    mv = _view(tensor, what, True)
    ranks = tuple(range(st.size)) if group is None else group.ranks
    if src not in ranks:
        raise ValueError(f"{what}: rank {src!r} is not in the group {list(ranks)}")
    if st.rank not in ranks:
        raise ValueError(f"{what}: this rank ({st.rank}) is not in the group {list(ranks)}")
    _flush(st, what, None)  # the pending isends and irecvs first
    _check(_bridge.broadcast(st.gen, st.rank, mv, ranks.index(src), _comm(group), what), what)
    return _done_work(st, async_op)


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    st = _me()
    what = f"all_reduce ({_where()})"
    if op != ReduceOp.SUM:
        raise ValueError(f"{what}: only ReduceOp.SUM is modelled")
    mv = _view(tensor, what, True)
    if mv.format != "f":
        raise TypeError(f"{what}: all_reduce sums float32 arrays, not format {mv.format!r}")
    _member(st, group, what)
    _flush(st, what, None)  # the pending isends and irecvs first
    _check(_bridge.all_reduce_f32(st.gen, st.rank, mv, _comm(group), what), what)
    return _done_work(st, async_op)


def all_gather(tensor_list, tensor, group=None, async_op=False):
    st = _me()
    what = f"all_gather ({_where()})"
    n = get_world_size(group)
    mv = _view(tensor, what, False)
    if len(tensor_list) != n:
        raise ValueError(f"{what}: tensor_list has {len(tensor_list)} entries, not {n}")
    outs = [_view(t, what, True) for t in tensor_list]
    if any(o.nbytes != mv.nbytes for o in outs):
        raise ValueError(f"{what}: every entry of tensor_list must have the tensor's size")
    _member(st, group, what)
    _flush(st, what, None)  # the pending isends and irecvs first
    every = bytearray(n * mv.nbytes)
    _check(_bridge.all_gather(st.gen, st.rank, mv, every, _comm(group), what), what)
    for i, o in enumerate(outs):
        o.cast("B")[:] = every[i * mv.nbytes:(i + 1) * mv.nbytes]
    return _done_work(st, async_op)


def barrier(group=None, async_op=False):
    st = _me()
    what = f"barrier ({_where()})"
    _member(st, group, what)
    _flush(st, what, None)  # the pending isends and irecvs first
    one = bytearray(4)
    mv = memoryview(one).cast("f")
    mv[0] = 1.0
    _check(_bridge.all_reduce_f32(st.gen, st.rank, mv, _comm(group), what), what)
    return _done_work(st, async_op)


def _member(st, group, what):
    if group is not None and st.rank not in group.ranks:
        raise ValueError(f"{what}: this rank ({st.rank}) is not in {group}")


def _done_work(st, async_op):
    if not async_op:
        return None
    w = Work(st)
    w._done = True
    return w


# ---- run by ppv: one thread a rank --------------------------------------------------------


def _place(exc):
    """The innermost frame of the user's code in exc's traceback: file:line."""
    tb = exc.__traceback__
    place = "?"
    while tb is not None:
        fn = tb.tb_frame.f_code.co_filename
        if fn != __file__:
            place = f"{fn.rsplit('/', 1)[-1]}:{tb.tb_lineno}"
        tb = tb.tb_next
    return place


def _run_rank(function, rank, size, gen):
    """A rank's thread: waits for its turn, runs function(rank, size), and
    tells ppv how it ended."""
    if _bridge.begin(gen, rank) != 0:
        _bridge.end(gen, rank, None)
        return
    _local.state = _State(rank, size, gen)
    error = None
    try:
        function(rank, size)
        st = _local.state
        if st.pending:
            _flush(st, "the end of the function", None)
    except DistError as e:
        error = f"DistError: {e}"
    except BaseException as e:  # the rank's own failure, with its place
        error = f"{type(e).__name__}: {e} ({_place(e)})"
    finally:
        _local.state = None
    _bridge.end(gen, rank, error)
