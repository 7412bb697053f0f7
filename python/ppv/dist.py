"""ppv.dist: a torch.distributed-shaped module whose every call is a
scheduling point of ppv's mock world, so that a control plane written
against torch.distributed runs under `ppv fuzz py FILE.py:FUNCTION -n RANKS`
(many interleavings, injected faults, deadlocks reported with each rank's
place, replayable traces) by swapping the module:

    import ppv.dist as dist        # instead of: import torch.distributed as dist

    def main(rank, world_size):
        dist.init_process_group("gloo")
        if rank == 0:
            dist.send(torch.arange(4.0), dst=1)
        ...

Payloads are torch CPU tensors, numpy arrays (C-contiguous) or, for what is
only sent, bytes; what is received into must be writable. The semantics
are torch.distributed's with gloo (measured on torch 1.13, documented in
docs/explorer.md):

- send is rendezvous (it waits for its receive) unless `--semantics` says
  otherwise; recv(src=None) receives from any rank and returns the
  sender's global rank.
- isend and irecv are posted at once and each completes when it is
  matched; Work.wait() waits for its own operation only, and collectives
  do not wait for pending point-to-point operations. An isend's data is
  taken when it is called. Work.is_completed() of an isend turns True when
  it is received; of an irecv it stays False until wait() (gloo's
  behaviour: a loop polling it never ends, and ppv reports that hang).
  batch_isend_irecv posts a list of P2POp at once. irecv(src=None) is
  made at its wait() (the first message there; source_rank() names its
  sender), and a receive on its group before that wait is refused.
- Collectives reduce, gather and scatter tensors of any dtype, with every
  ReduceOp gloo has (SUM, PRODUCT, MIN, MAX, BAND, BOR, BXOR; AVG raises,
  as on gloo), summed in rank order so the bits never depend on the
  interleaving. Ranks that call different collectives (or one with
  another size, dtype, op or root) at the same place of a group fail the
  run naming which rank made which call.
- new_group(ranks) is called by every rank (a rank outside it gets a
  group on which its collectives return at once, as torch's
  non-members), in a world of any size. Roots and peers are global ranks,
  as in torch.
- Point-to-point tags match as on gloo: a receive takes the next message
  of its sender with its tag, each tag in its own order. Timeouts are
  ppv's (an idle rank, a hang).
- A rank's own threads (threading.Thread, ranks as processes) take
  turns: a call that would wait lets the rank's other threads run, and
  threading's and queue's waits, join and time.sleep do the same; time
  is the rank's virtual clock (see "a rank's own threads" below).
- Under plain Python, outside ppv, every call raises DistError.

Every failed call raises DistError; the run it was in is already a failure
(ppv reports it), and the rank should let the exception end its function.
"""
import os
import pickle
import struct
import sys
import threading

try:
    from ppv import _bridge
except ImportError:  # plain Python: no world to run in
    _bridge = None

__all__ = ["DistError", "ReduceOp", "Work", "Group", "GroupMember", "group", "P2POp",
           "init_process_group", "is_initialized", "is_available", "destroy_process_group",
           "get_rank", "get_world_size", "get_backend", "new_group", "get_global_rank",
           "get_group_rank", "get_process_group_ranks", "send", "recv", "isend", "irecv",
           "batch_isend_irecv", "broadcast", "all_reduce", "reduce", "all_gather",
           "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor", "gather",
           "scatter", "all_to_all", "all_to_all_single", "barrier", "monitored_barrier",
           "broadcast_object_list", "all_gather_object", "gather_object",
           "scatter_object_list", "send_object_list", "recv_object_list"]


class DistError(RuntimeError):
    """A ppv.dist call failed: the world stopped (a deadlock, a hang, another
    rank's failure), a collective mismatched, or the call was wrong."""


class ReduceOp:
    SUM = "SUM"
    PRODUCT = "PRODUCT"
    MIN = "MIN"
    MAX = "MAX"
    BAND = "BAND"
    BOR = "BOR"
    BXOR = "BXOR"
    AVG = "AVG"


class Group:
    """A set of global ranks and its communicator (ranks None: the world)."""

    def __init__(self, ranks, comm):
        self.ranks = None if ranks is None else tuple(ranks)
        self.comm = comm

    def __repr__(self):
        return "Group(WORLD)" if self.ranks is None else f"Group(ranks={list(self.ranks)})"


class GroupMember:
    WORLD = Group(None, 0)
    NON_GROUP_MEMBER = object()


class group:  # torch.distributed.group
    WORLD = GroupMember.WORLD


_local = threading.local()
_HERE = os.path.dirname(os.path.abspath(__file__))


_ranks_here = 0  # ranks running in this process (their own threads)


def _me(needs_init=True):
    st = getattr(_local, "state", None)
    if st is None and _ranks_here:
        raise RuntimeError(f"ppv.dist is called from a thread ppv does not run "
                           f"({threading.current_thread().name}): under ppv fuzz py a rank's "
                           f"threads communicate when started with threading.Thread, with "
                           f"--ranks-as processes (the default)")
    if st is None:
        raise DistError("ppv.dist is used outside a rank of `ppv fuzz py` (run the file under "
                        "ppv fuzz py FILE.py:FUNCTION -n RANKS)")
    if needs_init and _torch_mode and not st.initialized:  # torch's own rule
        raise RuntimeError("Default process group has not been initialized, please make sure "
                           "to call init_process_group.")
    return st


def _user_file(fn):
    """Whether fn is the user's code, not ppv's, Python's or a library's."""
    if os.path.dirname(os.path.abspath(fn)) == _HERE or fn.startswith("<"):
        return False
    return not any(part in fn for part in ("/site-packages/", "/dist-packages/",
                                           "/lib/python3"))


def _where():
    """The call's place in the user's terms: the innermost frame in the
    file ppv runs (file:line), and when the call itself is made in a
    helper of another file, the helper's frame under it
    ("ctl.py:40<helpers.py:12")."""
    st = getattr(_local, "state", None)
    target = st.target if st else None
    f = sys._getframe(1)
    inner = None
    while f is not None:
        fn = f.f_code.co_filename
        if fn == __file__ and f.f_code.co_name == "_run_rank":
            break
        if fn == target:
            here = f"{os.path.basename(fn)}:{f.f_lineno}"
            return _in_thread(st, here if inner is None else f"{here}<{inner}")
        if inner is None and _user_file(fn):
            inner = f"{os.path.basename(fn)}:{f.f_lineno}"
        f = f.f_back
    return _in_thread(st, inner or "?")


def _in_thread(st, place):
    """place, with the thread's name when a thread the rank started makes
    the call."""
    c = st.coop if st is not None else None
    t = c.here() if c is not None else None
    return place if t is None or t is c.threads[0] else f"{place} in {t.name}"


def _check(rc, what):
    if rc == 0:
        return
    if rc == _bridge.ABORTED:
        why = "the world stopped (a deadlock, a hang or another rank's failure; ppv reports it)"
    elif rc == _bridge.MISMATCH:
        why = "a collective mismatch (ppv reports it)"
    elif rc == _bridge.STALE:
        why = "this thread's run is over"
    elif rc == _bridge.TOO_BIG:
        why = (f"the message is larger than a rank's process carries "
               f"({_bridge.MESSAGE_BYTES >> 20} MiB a call; --ranks-as threads has no such bound)")
    else:
        why = "a wrong peer, group or nesting (ppv reports it)"
    raise DistError(f"{what}: {why}")


def _np():
    import numpy
    return numpy


def _array(obj, what, writable):
    """obj as a numpy array sharing its memory (a torch CPU tensor, a numpy
    array, bytes or a bytearray)."""
    if hasattr(obj, "is_cuda") and hasattr(obj, "numpy"):  # a torch tensor
        if obj.is_cuda:
            raise TypeError(f"{what}: a CUDA tensor; ppv's world holds CPU tensors (move it "
                            f"with .cpu())")
        if not obj.is_contiguous():
            raise TypeError(f"{what}: the tensor must be contiguous (.contiguous())")
        return obj.detach().numpy()
    np = _np()
    if isinstance(obj, np.ndarray):
        if not obj.flags.c_contiguous:
            raise TypeError(f"{what}: the payload must be C-contiguous")
        if writable and not obj.flags.writeable:
            raise TypeError(f"{what}: the payload is received into, so it must be writable")
        return obj
    if isinstance(obj, (bytes, bytearray, memoryview)):
        if writable and (isinstance(obj, bytes) or (isinstance(obj, memoryview) and
                                                    obj.readonly)):
            raise TypeError(f"{what}: the payload is received into, so it must be writable (a "
                            f"numpy array, a tensor or a bytearray), not {type(obj).__name__}")
        return np.frombuffer(obj, dtype=np.uint8)
    raise TypeError(f"{what}: the payload must be a tensor, a numpy array or bytes, not "
                    f"{type(obj).__name__}")


class _State:
    def __init__(self, rank, size, gen):
        self.rank = rank
        self.size = size
        self.gen = gen
        self.initialized = False
        self.backend = "gloo"
        self.clock_read = None  # the rank's last time.monotonic(), before its first thread
        self.live = []  # the buffers of receives still pending (until the rank ends)
        self.target = None  # the file ppv runs: the user's call sites are there
        self.tagged = {}  # (group's ranks, tag): the communicator of that tag's messages
        self.any_pending = {}  # communicator: its irecv(src=None) not yet waited for
        self.coop = None  # _Coop: the rank's threads take turns (from its first Thread.start)


class Work:
    """What the asynchronous calls return: wait() completes it."""

    def __init__(self, st, op_id=0, recv=False, keep=None):
        self._st = st
        self._id = op_id      # 0: already complete (a collective)
        self._recv = recv
        self._keep = keep     # a pending receive's buffer, alive until it completes
        self._done = op_id == 0

    def is_completed(self):
        if self._done:
            return True
        if self._st.coop is not None:  # the rank's other threads may go on first
            self._st.coop.yield_(f"is_completed ({_where()})")
        if self._recv:        # gloo: an irecv completes only in wait(); a poll is a
            what = f"is_completed ({_where()})"  # scheduling point, never progress
            _check(_bridge.yield_(self._st.gen, self._st.rank, what), what)
            return False
        rc, done = _bridge.test_op(self._st.gen, self._st.rank, self._id, "is_completed")
        _check(rc, f"is_completed ({_where()})")
        self._done = bool(done)
        return self._done

    def wait(self, timeout=None):
        if not self._done:
            what = f"wait ({_where()})"
            if self._st.coop is not None:
                self._st.coop.op(self._id, what)
            else:
                _check(_bridge.wait_op(self._st.gen, self._st.rank, self._id, what), what)
            self._done = True
            self._keep = None
        return True

    def is_success(self):
        return self._done


class _AnyRecv(Work):
    """irecv(src=None): the receive from any rank is made at wait() (as
    recv(src=None) makes it), so no other receive may take a message of
    its communicator before then: torch's posted receive would match the
    first one, and ppv refuses that order rather than model it wrongly."""

    def __init__(self, st, a, comm, peers, what):
        super().__init__(st, op_id=-1, recv=True, keep=a)
        self._done = False
        self._comm, self._peers, self._what = comm, peers, what
        self._source = -1

    def wait(self, timeout=None):
        if not self._done:
            what = f"wait for {self._what}"
            self._source = _recv_any(self._st, self._keep, self._comm, self._peers, what)
            self._done = True
            self._keep = None
            self._st.any_pending.pop(self._comm, None)
        return True

    def source_rank(self):
        if not self._done:
            raise RuntimeError("source_rank: the receive from any rank has not completed "
                               "(wait() for it first)")
        return self._source


def _no_any_pending(st, comm, what):
    w = st.any_pending.get(comm)
    if w is not None:
        raise ValueError(f"{what}: {w._what} is still pending on this group; ppv makes a "
                         f"receive from any rank at its wait(), so no other receive may come "
                         f"before it (not modelled): wait() for it first")


def _recv_any(st, a, comm, peers, what):
    """A receive from any of peers on comm: waits until some member's
    message is there (the scheduler decides whose comes first), then takes
    the lowest-numbered; the sender."""
    while True:
        if st.coop is not None:
            st.coop.any(comm, what)
        else:
            _check(_bridge.wait_any(st.gen, st.rank, comm, what), what)
        for p in peers:
            rc, arrived = _bridge.probe(st.gen, st.rank, p, comm, what)
            _check(rc, what)
            if arrived:
                _check(_bridge.recv(st.gen, st.rank, a, p, comm, what), what)
                return p


class P2POp:
    """One operation of batch_isend_irecv: op is isend or irecv."""

    def __init__(self, op, tensor, peer, group=None, tag=0):
        if op not in (isend, irecv):
            raise ValueError("P2POp: op must be ppv.dist.isend or ppv.dist.irecv")
        self.op, self.tensor, self.peer, self.group, self.tag = op, tensor, peer, group, tag


def _group_ranks(st, grp):
    if grp is None or grp is GroupMember.WORLD or getattr(grp, "ranks", 0) is None:
        return tuple(range(st.size))
    if grp is GroupMember.NON_GROUP_MEMBER:
        return ()
    return grp.ranks


def _comm(grp):
    if grp is None or grp is GroupMember.NON_GROUP_MEMBER:
        return 0
    return grp.comm


def _gname(st, grp):
    ranks = _group_ranks(st, grp)
    return "" if len(ranks) == st.size else f" [{','.join(map(str, ranks))}]"


def _peer(st, peer, grp, what):
    if not isinstance(peer, int) or isinstance(peer, bool) or not 0 <= peer < st.size:
        raise ValueError(f"{what}: rank {peer!r} is not one of 0..{st.size - 1}")
    if peer == st.rank:
        raise ValueError(f"{what}: rank {peer} is this rank")
    if peer not in _group_ranks(st, grp):
        raise ValueError(f"{what}: rank {peer} is not in {grp}")
    return peer


def _tname(tag):
    return f" tag {tag}" if tag != 0 else ""


def _p2p_comm(st, grp, tag, what):
    """The communicator a point-to-point call with tag goes on: the group's
    for tag 0; for another tag, one of the group's ranks for that tag
    alone (made by the world when a rank first uses it), so messages match
    by (sender, receiver, tag) and each tag keeps its own order, as on
    gloo."""
    if not isinstance(tag, int) or isinstance(tag, bool):
        raise TypeError(f"{what}: tag must be an int, not {type(tag).__name__}")
    if tag == 0:
        return _comm(grp)
    ranks = tuple(_group_ranks(st, grp))
    comm = st.tagged.get((ranks, tag))
    if comm is None:
        rc, comm = _bridge.new_group(st.gen, st.rank, struct.pack(f"{len(ranks)}i", *ranks),
                                     tag, what)
        _check(rc, what)
        st.tagged[(ranks, tag)] = comm
    return comm


def _member(st, grp):
    """Whether this rank takes part in a collective on grp (a non-member's
    call returns at once, as in torch)."""
    return st.rank in _group_ranks(st, grp)


# ---- the API ------------------------------------------------------------------------------


_BACKENDS = {"gloo", "nccl", "ppv"}  # what ppv's world stands in for (its send semantics)


def is_available():
    return True


def init_process_group(backend=None, init_method=None, world_size=-1, rank=-1, **kwargs):
    st = _me(needs_init=False)
    if world_size not in (-1, st.size) or rank not in (-1, st.rank):
        raise ValueError(f"init_process_group: this is rank {st.rank} of {st.size}, not rank "
                         f"{rank} of {world_size}")
    name = "gloo" if backend is None else str(backend).lower()
    if not all(part.split(":")[-1] in _BACKENDS for part in name.split(",")):
        raise ValueError(f"init_process_group: ppv stands in for the backends "
                         f"{', '.join(sorted(_BACKENDS))}, not {backend!r}")
    st.backend = name
    st.initialized = True


def is_initialized():
    st = getattr(_local, "state", None)
    return bool(st and st.initialized)


def destroy_process_group(group=None):
    st = _me(needs_init=False)
    if group is None:
        st.initialized = False


def get_backend(group=None):
    return _me().backend


def get_rank(group=None):
    st = _me()
    ranks = _group_ranks(st, group)
    return ranks.index(st.rank) if st.rank in ranks else -1


def get_world_size(group=None):
    st = _me()
    ranks = _group_ranks(st, group)
    return len(ranks) if st.rank in ranks or group is None else -1


def get_global_rank(group, group_rank):
    return _group_ranks(_me(), group)[group_rank]


def get_group_rank(group, global_rank):
    return _group_ranks(_me(), group).index(global_rank)


def get_process_group_ranks(group):
    return list(_group_ranks(_me(), group))


def new_group(ranks=None, timeout=None, backend=None, pg_options=None, **kwargs):
    st = _me()
    ranks = sorted(set(range(st.size) if ranks is None else ranks))
    if not ranks or any(not isinstance(r, int) or not 0 <= r < st.size for r in ranks):
        raise ValueError(f"new_group: ranks {ranks!r} are not ranks of 0..{st.size - 1}")
    mask = 0
    for r in ranks:
        mask |= 1 << r
    comm = _bridge.comm_of(mask)
    if comm < 0:  # a world of more than 6 ranks: the world makes it (the first rank to ask)
        what = f"new_group {ranks} ({_where()})"
        rc, comm = _bridge.new_group(st.gen, st.rank, struct.pack(f"{len(ranks)}i", *ranks),
                                     0, what)
        _check(rc, what)
    return Group(ranks, comm)


def send(tensor, dst, group=None, tag=0):
    st = _me()
    what = f"send to {dst}{_gname(st, group)}{_tname(tag)} ({_where()})"
    comm = _p2p_comm(st, group, tag, what)
    a = _array(tensor, what, False)
    if st.coop is not None:  # the rank's other threads go on while it waits
        rc, op_id = _bridge.isend(st.gen, st.rank, a, _peer(st, dst, group, what), comm, what)
        _check(rc, what)
        st.coop.op(op_id, what)
        return
    _check(_bridge.send(st.gen, st.rank, a, _peer(st, dst, group, what), comm, what), what)


def recv(tensor, src=None, group=None, tag=0):
    st = _me()
    peer = "any" if src is None else src
    what = f"recv from {peer}{_gname(st, group)}{_tname(tag)} ({_where()})"
    comm = _p2p_comm(st, group, tag, what)
    _no_any_pending(st, comm, what)
    a = _array(tensor, what, True)
    if src is not None and st.coop is not None:
        rc, op_id = _bridge.irecv(st.gen, st.rank, a, _peer(st, src, group, what), comm, what)
        _check(rc, what)
        st.coop.op(op_id, what)
        return src
    if src is not None:
        _check(_bridge.recv(st.gen, st.rank, a, _peer(st, src, group, what), comm, what), what)
        return src
    return _recv_any(st, a, comm, [r for r in _group_ranks(st, group) if r != st.rank], what)


def isend(tensor, dst, group=None, tag=0):
    st = _me()
    what = f"isend to {dst}{_gname(st, group)}{_tname(tag)} ({_where()})"
    comm = _p2p_comm(st, group, tag, what)
    a = _array(tensor, what, False)
    rc, op_id = _bridge.isend(st.gen, st.rank, a, _peer(st, dst, group, what), comm, what)
    _check(rc, what)
    return Work(st, op_id)


def irecv(tensor, src=None, group=None, tag=0):
    st = _me()
    peer = "any" if src is None else src
    what = f"irecv from {peer}{_gname(st, group)}{_tname(tag)} ({_where()})"
    comm = _p2p_comm(st, group, tag, what)
    _no_any_pending(st, comm, what)
    a = _array(tensor, what, True)
    if src is None:
        w = _AnyRecv(st, a, comm, [r for r in _group_ranks(st, group) if r != st.rank], what)
        st.any_pending[comm] = w
        st.live.append(a)
        return w
    rc, op_id = _bridge.irecv(st.gen, st.rank, a, _peer(st, src, group, what), comm, what)
    _check(rc, what)
    st.live.append(a)
    return Work(st, op_id, recv=True, keep=a)


def batch_isend_irecv(p2p_op_list):
    if not p2p_op_list or not all(isinstance(p, P2POp) for p in p2p_op_list):
        raise ValueError("batch_isend_irecv takes a non-empty list of P2POp")
    return [p.op(p.tensor, p.peer, p.group, p.tag) for p in p2p_op_list]


# ---- collectives: every one a header (what each rank calls, to name a
# mismatch in the program's terms), then its data ------------------------------------------

_HEAD = 96  # bytes of a collective's header: its description, padded


def _agree(st, grp, call, what):
    """All-gathers each member's description of its call (and its place);
    a member that called something else fails the run, naming which rank
    made which call where."""
    place = what[what.rfind("(") + 1:-1] if what.endswith(")") else "?"
    me = (call + "\x1f" + place).encode()[:_HEAD - 1]
    mine = bytearray(_HEAD)
    mine[:len(me)] = me
    n = len(_group_ranks(st, grp))
    every = bytearray(n * _HEAD)
    _check(_bridge.all_gather(st.gen, st.rank, mine, every, _comm(grp), what), what)
    calls = [bytes(every[k * _HEAD:(k + 1) * _HEAD]).rstrip(b"\0").decode(errors="replace")
             .split("\x1f") + ["?"] for k in range(n)]
    if any(c[0] != calls[0][0] for c in calls):
        ranks = _group_ranks(st, grp)
        told = "; ".join(f"rank {r} calls {c[0]} ({c[1]})" for r, c in zip(ranks, calls))
        raise DistError(f"collective mismatch on the group{_gname(st, grp) or ' of every rank'}: "
                        f"{told}")


def _desc(kind, a=None, op=None, root=None):
    parts = [kind]
    if a is not None:
        parts.append(f"{a.dtype}{list(a.shape)}")
    if op is not None:
        parts.append(op)
    if root is not None:
        parts.append(f"src={root}")
    return " ".join(parts)


def _gather_bytes(st, grp, data, what):
    """Every member's bytes (equal sizes), in group rank order."""
    n = len(_group_ranks(st, grp))
    every = bytearray(n * len(data))
    _check(_bridge.all_gather(st.gen, st.rank, bytes(data), every, _comm(grp), what), what)
    return [bytes(every[k * len(data):(k + 1) * len(data)]) for k in range(n)]


_OPS = {
    ReduceOp.SUM: lambda np, a, b: a + b,
    ReduceOp.PRODUCT: lambda np, a, b: a * b,
    ReduceOp.MIN: lambda np, a, b: np.minimum(a, b),
    ReduceOp.MAX: lambda np, a, b: np.maximum(a, b),
    ReduceOp.BAND: lambda np, a, b: a & b,
    ReduceOp.BOR: lambda np, a, b: a | b,
    ReduceOp.BXOR: lambda np, a, b: a ^ b,
}


def _op_name(op, what):
    name = getattr(op, "name", op)
    name = str(name).split(".")[-1].upper()
    if name == "AVG":
        raise ValueError(f"{what}: ReduceOp.AVG is not supported by gloo")
    if name not in _OPS:
        raise ValueError(f"{what}: {op!r} is not a ReduceOp")
    return name


def _reduce_parts(parts, a, op):
    """The members' arrays reduced in rank order (the same bits whatever
    the interleaving)."""
    np = _np()
    acc = np.frombuffer(parts[0], dtype=a.dtype).reshape(a.shape).copy()
    f = _OPS[op]
    for p in parts[1:]:
        acc = f(np, acc, np.frombuffer(p, dtype=a.dtype).reshape(a.shape)).astype(a.dtype)
    return acc


def _done(st, async_op):
    return Work(st) if async_op else None


def broadcast(tensor, src, group=None, async_op=False):
    st = _me()
    where = _where()
    what = f"broadcast src={src}{_gname(st, group)} ({where})"
    a = _array(tensor, what, True)
    ranks = _group_ranks(st, group)
    if src not in ranks:
        raise ValueError(f"{what}: rank {src!r} is not in the group {list(ranks)}")
    if not _member(st, group):
        return _done(st, async_op)
    _agree(st, group, _desc("broadcast", a, root=src), what)
    _check(_bridge.broadcast(st.gen, st.rank, a.reshape(-1).view("u1"), ranks.index(src),
                             _comm(group), what), what)
    return _done(st, async_op)


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    st = _me()
    what = f"all_reduce{_gname(st, group)} ({_where()})"
    a = _array(tensor, what, True)
    name = _op_name(op, what)
    if not _member(st, group):
        return _done(st, async_op)
    _agree(st, group, _desc("all_reduce", a, name), what)
    a[...] = _reduce_parts(_gather_bytes(st, group, a.tobytes(), what), a, name)
    return _done(st, async_op)


def reduce(tensor, dst, op=ReduceOp.SUM, group=None, async_op=False):
    st = _me()
    what = f"reduce dst={dst}{_gname(st, group)} ({_where()})"
    a = _array(tensor, what, True)
    name = _op_name(op, what)
    if not _member(st, group):
        return _done(st, async_op)
    _agree(st, group, _desc("reduce", a, name, root=dst), what)
    out = _reduce_parts(_gather_bytes(st, group, a.tobytes(), what), a, name)
    if st.rank == dst:
        a[...] = out
    return _done(st, async_op)


def all_gather(tensor_list, tensor, group=None, async_op=False):
    st = _me()
    what = f"all_gather{_gname(st, group)} ({_where()})"
    a = _array(tensor, what, False)
    if not _member(st, group):
        return _done(st, async_op)
    n = len(_group_ranks(st, group))
    if len(tensor_list) != n:
        raise ValueError(f"{what}: tensor_list has {len(tensor_list)} entries, not {n}")
    outs = [_array(t, what, True) for t in tensor_list]
    if any(o.nbytes != a.nbytes for o in outs):
        raise ValueError(f"{what}: every entry of tensor_list must have the tensor's size")
    _agree(st, group, _desc("all_gather", a), what)
    for o, p in zip(outs, _gather_bytes(st, group, a.tobytes(), what)):
        o.reshape(-1).view("u1")[:] = _np().frombuffer(p, dtype="u1")
    return _done(st, async_op)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    st = _me()
    what = f"all_gather_into_tensor{_gname(st, group)} ({_where()})"
    a = _array(input_tensor, what, False)
    out = _array(output_tensor, what, True)
    if not _member(st, group):
        return _done(st, async_op)
    n = len(_group_ranks(st, group))
    if out.nbytes != n * a.nbytes:
        raise ValueError(f"{what}: the output holds {out.nbytes} bytes, not {n} x {a.nbytes}")
    _agree(st, group, _desc("all_gather_into_tensor", a), what)
    out.reshape(-1).view("u1")[:] = _np().frombuffer(
        b"".join(_gather_bytes(st, group, a.tobytes(), what)), dtype="u1")
    return _done(st, async_op)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    st = _me()
    what = f"reduce_scatter{_gname(st, group)} ({_where()})"
    out = _array(output, what, True)
    name = _op_name(op, what)
    if not _member(st, group):
        return _done(st, async_op)
    ins = [_array(t, what, False) for t in input_list]
    n = len(_group_ranks(st, group))
    if len(ins) != n or any(i.nbytes != out.nbytes for i in ins):
        raise ValueError(f"{what}: input_list needs {n} tensors of the output's size")
    _agree(st, group, _desc("reduce_scatter", out, name), what)
    np = _np()
    whole = np.concatenate([i.reshape(-1) for i in ins])
    parts = _gather_bytes(st, group, whole.tobytes(), what)
    me = get_rank(group)
    size = out.nbytes
    mine = [p[me * size:(me + 1) * size] for p in parts]
    out[...] = _reduce_parts(mine, out, name)
    return _done(st, async_op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    st = _me()
    what = f"reduce_scatter_tensor{_gname(st, group)} ({_where()})"
    out = _array(output, what, True)
    a = _array(input, what, False)
    name = _op_name(op, what)
    if not _member(st, group):
        return _done(st, async_op)
    n = len(_group_ranks(st, group))
    if a.nbytes != n * out.nbytes:
        raise ValueError(f"{what}: the input holds {a.nbytes} bytes, not {n} x {out.nbytes}")
    _agree(st, group, _desc("reduce_scatter_tensor", out, name), what)
    parts = _gather_bytes(st, group, a.tobytes(), what)
    me, size = get_rank(group), out.nbytes
    out[...] = _reduce_parts([p[me * size:(me + 1) * size] for p in parts], out, name)
    return _done(st, async_op)


def gather(tensor, gather_list=None, dst=0, group=None, async_op=False):
    st = _me()
    what = f"gather dst={dst}{_gname(st, group)} ({_where()})"
    a = _array(tensor, what, False)
    if not _member(st, group):
        return _done(st, async_op)
    n = len(_group_ranks(st, group))
    if st.rank == dst and (gather_list is None or len(gather_list) != n):
        raise ValueError(f"{what}: the destination needs a gather_list of {n} tensors")
    _agree(st, group, _desc("gather", a, root=dst), what)
    parts = _gather_bytes(st, group, a.tobytes(), what)
    if st.rank == dst:
        for t, p in zip(gather_list, parts):
            _array(t, what, True).reshape(-1).view("u1")[:] = _np().frombuffer(p, dtype="u1")
    return _done(st, async_op)


def scatter(tensor, scatter_list=None, src=0, group=None, async_op=False):
    st = _me()
    what = f"scatter src={src}{_gname(st, group)} ({_where()})"
    out = _array(tensor, what, True)
    if not _member(st, group):
        return _done(st, async_op)
    ranks = _group_ranks(st, group)
    n = len(ranks)
    np = _np()
    whole = np.zeros(n * out.nbytes, dtype="u1")
    if st.rank == src:
        if scatter_list is None or len(scatter_list) != n:
            raise ValueError(f"{what}: the source needs a scatter_list of {n} tensors")
        whole[:] = np.frombuffer(b"".join(_array(t, what, False).tobytes()
                                          for t in scatter_list), dtype="u1")
    _agree(st, group, _desc("scatter", out, root=src), what)
    _check(_bridge.broadcast(st.gen, st.rank, whole, ranks.index(src), _comm(group), what), what)
    me = ranks.index(st.rank)
    out.reshape(-1).view("u1")[:] = whole[me * out.nbytes:(me + 1) * out.nbytes]
    return _done(st, async_op)


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None,
                      group=None, async_op=False):
    st = _me()
    what = f"all_to_all_single{_gname(st, group)} ({_where()})"
    if output_split_sizes is not None or input_split_sizes is not None:
        raise ValueError(f"{what}: uneven splits are not modelled yet")
    out, a = _array(output, what, True), _array(input, what, False)
    if not _member(st, group):
        return _done(st, async_op)
    n = len(_group_ranks(st, group))
    if a.nbytes != out.nbytes or a.nbytes % n:
        raise ValueError(f"{what}: input and output must have one size, a multiple of {n}")
    _agree(st, group, _desc("all_to_all_single", a), what)
    parts = _gather_bytes(st, group, a.tobytes(), what)
    me, size = get_rank(group), a.nbytes // n
    out.reshape(-1).view("u1")[:] = _np().frombuffer(
        b"".join(p[me * size:(me + 1) * size] for p in parts), dtype="u1")
    return _done(st, async_op)


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    st = _me()
    what = f"all_to_all{_gname(st, group)} ({_where()})"
    if not _member(st, group):
        return _done(st, async_op)
    n = len(_group_ranks(st, group))
    ins = [_array(t, what, False) for t in input_tensor_list]
    outs = [_array(t, what, True) for t in output_tensor_list]
    if len(ins) != n or len(outs) != n or len({i.nbytes for i in ins + outs}) != 1:
        raise ValueError(f"{what}: {n} input and {n} output tensors of one size")
    _agree(st, group, _desc("all_to_all", ins[0]), what)
    parts = _gather_bytes(st, group, b"".join(i.tobytes() for i in ins), what)
    me, size = get_rank(group), ins[0].nbytes
    for o, p in zip(outs, parts):
        o.reshape(-1).view("u1")[:] = _np().frombuffer(p[me * size:(me + 1) * size], dtype="u1")
    return _done(st, async_op)


def barrier(group=None, async_op=False, device_ids=None):
    st = _me()
    what = f"barrier{_gname(st, group)} ({_where()})"
    if not _member(st, group):
        return _done(st, async_op)
    _agree(st, group, "barrier", what)
    return _done(st, async_op)


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """A barrier: a rank that never arrives is a deadlock ppv reports,
    naming the ranks that wait (torch raises on rank 0 after timeout)."""
    st = _me()
    what = f"monitored_barrier{_gname(st, group)} ({_where()})"
    if _member(st, group):
        _agree(st, group, "monitored_barrier", what)


# ---- the object collectives: pickled, a length then the bytes ----------------------------


def _objects_gather(st, grp, blob, what):
    """Every member's bytes of any length, in group rank order."""
    sizes = _gather_bytes(st, grp, struct.pack("<q", len(blob)), what)
    longest = max(struct.unpack("<q", s)[0] for s in sizes)
    padded = blob + bytes(longest - len(blob))
    parts = _gather_bytes(st, grp, padded, what) if longest else [b""] * len(sizes)
    return [p[:struct.unpack("<q", s)[0]] for p, s in zip(parts, sizes)]


def all_gather_object(object_list, obj, group=None):
    st = _me()
    what = f"all_gather_object{_gname(st, group)} ({_where()})"
    if not _member(st, group):
        return
    n = len(_group_ranks(st, group))
    if len(object_list) != n:
        raise ValueError(f"{what}: object_list has {len(object_list)} entries, not {n}")
    _agree(st, group, "all_gather_object", what)
    for k, blob in enumerate(_objects_gather(st, group, pickle.dumps(obj), what)):
        object_list[k] = pickle.loads(blob)


def gather_object(obj, object_gather_list=None, dst=0, group=None):
    st = _me()
    what = f"gather_object dst={dst}{_gname(st, group)} ({_where()})"
    if not _member(st, group):
        return
    _agree(st, group, f"gather_object src={dst}", what)
    blobs = _objects_gather(st, group, pickle.dumps(obj), what)
    if st.rank == dst:
        if object_gather_list is None or len(object_gather_list) != len(blobs):
            raise ValueError(f"{what}: the destination needs an object_gather_list of "
                             f"{len(blobs)} entries")
        for k, blob in enumerate(blobs):
            object_gather_list[k] = pickle.loads(blob)


def _broadcast_blob(st, grp, blob, src, what):
    ranks = _group_ranks(st, grp)
    np = _np()
    size = np.array([len(blob) if st.rank == src else 0], dtype=np.int64)
    _check(_bridge.broadcast(st.gen, st.rank, size.view("u1"), ranks.index(src), _comm(grp),
                             what), what)
    buf = np.zeros(int(size[0]), dtype="u1")
    if st.rank == src:
        buf[:] = np.frombuffer(blob, dtype="u1")
    if size[0]:
        _check(_bridge.broadcast(st.gen, st.rank, buf, ranks.index(src), _comm(grp), what),
               what)
    return buf.tobytes()


def broadcast_object_list(object_list, src=0, group=None, device=None):
    st = _me()
    what = f"broadcast_object_list src={src}{_gname(st, group)} ({_where()})"
    if not _member(st, group):
        return
    _agree(st, group, f"broadcast_object_list[{len(object_list)}] src={src}", what)
    blob = _broadcast_blob(st, group, pickle.dumps(list(object_list)) if st.rank == src else b"",
                           src, what)
    object_list[:] = pickle.loads(blob)


def send_object_list(object_list, dst=None, group=None, device=None, group_dst=None):
    """torch's two messages: the pickled sizes (an int64 each), then the
    pickled objects one after the other."""
    st = _me()
    dst = _object_peer(st, dst, group, group_dst, "send_object_list", "dst")
    np = _np()
    blobs = [pickle.dumps(o) for o in object_list]
    send(np.array([len(b) for b in blobs], dtype=np.int64), dst, group)
    send(np.frombuffer(b"".join(blobs) or b"\0", dtype="u1"), dst, group)


def recv_object_list(object_list, src=None, group=None, device=None, group_src=None):
    """object_list filled from the sender's two messages, each received
    from src as torch receives them (from any rank where src is None, so
    two ranks sending at once can mix them up, which torch names); the
    sender."""
    st = _me()
    if src is not None or group_src is not None:
        src = _object_peer(st, src, group, group_src, "recv_object_list", "src")
    np = _np()
    sizes = np.zeros(len(object_list), dtype=np.int64)
    sender = recv(sizes, src, group)
    buf = np.zeros(max(int(sizes.sum()), 1), dtype="u1")
    if recv(buf, src, group) != sender:
        raise RuntimeError("recv_object_list: mismatch in source ranks for object sizes and "
                           "objects (torch's check)")
    at = 0
    for k, n in enumerate(sizes.tolist()):
        object_list[k] = pickle.loads(buf[at:at + n].tobytes())
        at += n
    return sender


def _object_peer(st, peer, group, group_peer, call, name):
    """torch 2.x's group_dst/group_src: a rank of group, as a global rank."""
    if group_peer is None:
        return peer
    if peer is not None:
        raise ValueError(f"{call}: give {name} or group_{name}, not both")
    return get_global_rank(group, group_peer)


def scatter_object_list(scatter_object_output_list, scatter_object_input_list=None, src=0,
                        group=None):
    st = _me()
    what = f"scatter_object_list src={src}{_gname(st, group)} ({_where()})"
    if not _member(st, group):
        return
    n = len(_group_ranks(st, group))
    _agree(st, group, f"scatter_object_list src={src}", what)
    if st.rank == src and (scatter_object_input_list is None or
                           len(scatter_object_input_list) != n):
        raise ValueError(f"{what}: the source needs a scatter_object_input_list of {n}")
    blob = _broadcast_blob(st, group, pickle.dumps(list(scatter_object_input_list))
                           if st.rank == src else b"", src, what)
    scatter_object_output_list[0] = pickle.loads(blob)[get_rank(group)]


# ---- torch.distributed code, unchanged ------------------------------------------------------

_torch_mode = False  # the file uses torch.distributed itself: its calls are routed here

# What a launcher (torchrun) sets for each rank; in a rank's thread, each
# rank sees its own.
_RANK_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
             "MASTER_PORT")


class _RankEnviron:
    """os.environ with the launcher's variables per rank thread."""

    def __init__(self, real):
        self._real = real

    def _rank(self, key):
        st = getattr(_local, "state", None)
        if st is None or key not in _RANK_ENV:
            return None
        return {"RANK": st.rank, "WORLD_SIZE": st.size, "LOCAL_RANK": st.rank,
                "LOCAL_WORLD_SIZE": st.size, "GROUP_RANK": 0, "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": 29500}[key]

    def __getitem__(self, key):
        v = self._rank(key)
        return str(v) if v is not None else self._real[key]

    def get(self, key, default=None):
        v = self._rank(key)
        return str(v) if v is not None else self._real.get(key, default)

    def __contains__(self, key):
        return self._rank(key) is not None or key in self._real

    def __getattr__(self, name):
        return getattr(self._real, name)

    def __setitem__(self, key, value):
        self._real[key] = value

    def __delitem__(self, key):
        del self._real[key]

    def __iter__(self):
        return iter(self._real)

    def __len__(self):
        return len(self._real)


def _no_fork(*args, **kwargs):
    if getattr(_local, "state", None) is not None:
        raise RuntimeError("a rank forks or execs: under ppv fuzz py a rank cannot start "
                           "processes of its own")
    return _no_fork.real[_no_fork.name](*args, **kwargs)


def _prepare(file):
    """Called by ppv before it imports file: when the file uses
    torch.distributed, torch.distributed's calls are routed to this module
    (so the code runs unchanged), the launcher's environment is each
    rank's, and a rank may not fork or exec."""
    global _torch_mode
    _install_turns()
    try:
        with open(file, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return
    import re
    if not re.search(r"^\s*(import\s+torch\.distributed|from\s+torch\.distributed\s+import|"
                     r"from\s+torch\s+import\s+.*\bdistributed\b)", text, re.M):
        return  # it does not import torch.distributed itself
    import torch.distributed as td  # ImportError: the user's file needs torch
    for name in __all__:  # torch's ReduceOp stays: torch's own modules use its types
        if name not in ("DistError", "ReduceOp"):  # (RedOpType), and ppv reads its names
            setattr(td, name, globals()[name])
    td.Work = Work
    td.ProcessGroup = Group
    _torch_mode = True
    if not isinstance(os.environ, _RankEnviron):
        os.environ = _RankEnviron(os.environ)
    _no_fork.real = {}
    for name in ("fork", "forkpty", "execv", "execve", "execl", "execle", "execlp", "execvp",
                 "execvpe", "posix_spawn", "posix_spawnp"):
        if hasattr(os, name):
            _no_fork.real[name] = getattr(os, name)

            def stop(*args, _name=name, **kwargs):
                _no_fork.name = _name
                return _no_fork(*args, **kwargs)
            setattr(os, name, stop)


def _script(file):
    """`ppv fuzz py FILE.py -n N`: each rank runs the file as its
    __main__, as torchrun runs it (a fresh namespace a rank and run), as
    runpy.run_path runs a file: a new module __main__ in sys.modules and
    sys.argv[0] the file while it runs. The file is compiled here, once
    (ranks as processes: in the zygote, before the runs); one that does
    not compile raises its SyntaxError in every rank, as Python would."""
    import types
    try:
        with open(file, "rb") as f:
            code = compile(f.read(), file, "exec", dont_inherit=True)
    except (OSError, SyntaxError, ValueError):
        code = None

    def main(rank, size):
        here = code
        if here is None:  # its error, in the rank
            with open(file, "rb") as f:
                here = compile(f.read(), file, "exec", dont_inherit=True)
        mod = types.ModuleType("__main__")
        mod.__dict__.update(__file__=file, __cached__=None, __loader__=None, __package__="",
                            __spec__=None)
        saved, argv0 = sys.modules.get("__main__"), sys.argv[0] if sys.argv else None
        sys.modules["__main__"] = mod
        if sys.argv:
            sys.argv[0] = file
        try:
            exec(here, mod.__dict__)
        except SystemExit as e:
            if e.code not in (None, 0):
                raise RuntimeError(f"the script exited with status {e.code}") from None
        finally:
            if saved is None:
                sys.modules.pop("__main__", None)
            else:
                sys.modules["__main__"] = saved
            if sys.argv:
                sys.argv[0] = argv0
    main._ppv_file = file
    return main


# ---- a rank's own threads (ranks as processes) ---------------------------------------------
#
# A thread a rank starts runs in the rank's process, one thread of the rank
# at a time: a turn (a baton) passes between them at the calls that would
# wait, so which one runs is decided by the program and the world alone,
# never by the operating system. A blocking send or receive of a thread is
# posted (as isend/irecv) and the thread waits for it; when none of the
# rank's threads can go on, the rank waits in the world for the first of
# their calls to complete (a scheduling point like any other), and that
# thread goes on. Locks, conditions, events, semaphores and queues made
# with threading and queue, Thread.join and time.sleep are waits of the
# same kind, and time.monotonic is the rank's virtual clock: a wait with a
# timeout ends only when no rank of the world can go on (the world's
# fire_timer), the earliest deadline first, the clock moving to it. A rank
# whose threads wait on each other with no call left
# to complete fails the run naming each thread and where it waits. Threads
# run in the order they became ready (the first thread after the one that
# waits), so the same world gives the same run. Collectives hold the rank's
# turn until they complete.

import _thread
import time as _time_mod

_real = {"monotonic": _time_mod.monotonic, "sleep": _time_mod.sleep}


class _Thr:
    """A thread of a rank: its baton (free when it is its turn) and what it
    waits on (None: ready to run)."""

    def __init__(self, name, daemon=False):
        self.name = name
        self.daemon = daemon
        self.baton = _thread.allocate_lock()
        self.baton.acquire()
        self.wait = None
        self.done = False


class _Wait:
    """What a thread waits on: a posted op ("op"), a message from any rank
    ("any"), or a condition of the rank's own ("cond", with a deadline on
    the virtual clock or None)."""

    def __init__(self, kind, what, op=0, comm=-1, pred=None, deadline=None):
        self.kind, self.what, self.op, self.comm = kind, what, op, comm
        self.pred, self.deadline = pred, deadline
        self.result = None  # cond: True when the condition held, False when timed out
        self.rc = 0         # op, any: the world's answer


class _Coop:
    """The turn-taking of one rank's threads (st.coop, made when the rank
    starts its first thread)."""

    def __init__(self, st):
        self.st = st
        main = _Thr("MainThread")
        self.threads = [main]
        self.by_ident = {_thread.get_ident(): main}
        self.current = main
        # the clock goes on from the last time the rank read (time passed
        # since then unseen), so a reading before the first thread started
        # and the virtual ones after it differ by virtual time alone
        self.now = self.t0 = st.clock_read if st.clock_read is not None else \
            _real["monotonic"]()
        self.failed = None

    def here(self):
        """The calling thread's record when it holds the turn, else None."""
        t = self.by_ident.get(_thread.get_ident())
        return t if t is not None and t is self.current and not t.done else None

    def _ready(self):
        """The next thread to run (after the current, in order), its wait
        settled; None when none can go on without the world."""
        n = len(self.threads)
        at = self.threads.index(self.current) if self.current in self.threads else -1
        for k in range(1, n + 1):
            t = self.threads[(at + k) % n]
            if t.done:
                continue
            if t.wait is None:
                return t
            if t.wait.kind == "cond" and t.wait.pred():
                t.wait.result = True
                return t
        return None

    def _next(self):
        """The thread that goes on next: a ready one; else the first whose
        call the world completes, or, when no rank of the world can go on,
        the one whose timeout ends first (the clock moves to it); a rank
        whose threads wait on each other, with no call and no timeout,
        fails."""
        while True:
            t = self._ready()
            if t is not None:
                return t
            live = [t for t in self.threads if not t.done]
            calls = [t for t in live if t.wait.kind in ("op", "any")]
            timed = sorted((t for t in live if t.wait.kind == "cond" and
                            t.wait.deadline is not None), key=lambda t: t.wait.deadline)
            if not calls and not timed:
                waits = "; ".join(f"{t.name} waits on {t.wait.what}" for t in live)
                self.fail(f"rank {self.st.rank}'s threads wait on each other, and no call of "
                          f"theirs can complete: {waits}")
                raise DistError(self.failed)
            ops = [t for t in calls if t.wait.kind == "op"]
            anys = [t for t in calls if t.wait.kind == "any"]
            # the words of the receives from any rank (a posted op has its own)
            what = "; ".join(t.wait.what for t in anys)[:60] or "a timeout"
            rc, which = _bridge.wait_some(
                self.st.gen, self.st.rank, struct.pack(f"{len(ops)}q", *[t.wait.op for t in ops]),
                struct.pack(f"{len(anys)}i", *[t.wait.comm for t in anys]), 1,
                timed[0].wait.deadline - self.t0 if timed else -1.0, what)
            if rc != 0:  # the world stopped: every waiting call fails
                for t in calls or timed[:1]:
                    t.wait.rc = rc
                    t.wait.result = False
                return (calls or timed)[0]
            if 0 <= which < len(ops):
                return ops[which]
            if len(ops) <= which < len(ops) + len(anys):
                return anys[which - len(ops)]
            if which < 0 and timed:
                t = timed[0]
                self.now = max(self.now, t.wait.deadline)
                t.wait.result = bool(t.wait.pred())
                return t

    def switch(self, me, leaving=False):
        """Gives the turn to the next thread and, unless me leaves, waits for
        it to come back."""
        self._hand(me, self._next(), leaving)

    def _hand(self, me, nxt, leaving=False):
        """The turn from me to nxt; unless me leaves, back when it comes."""
        if nxt is me:
            return
        self.current = nxt
        nxt.baton.release()
        if leaving:
            return
        me.baton.acquire()
        if self.failed is not None:
            raise DistError(self.failed)

    def block(self, wait):
        """The calling thread (holding the turn) waits on wait; returns it
        settled."""
        me = self.here()
        me.wait = wait
        try:
            self.switch(me)
        finally:
            me.wait = None
        return wait

    def until(self, pred, timeout, what):
        """Waits until pred() holds (pred takes what it waits for when it
        can), or timeout seconds of the rank's clock pass: True or False."""
        if pred():
            return True
        deadline = None if timeout is None or timeout < 0 else self.now + timeout
        return self.block(_Wait("cond", what, pred=pred, deadline=deadline)).result

    def yield_(self, what):
        """Lets the rank's other threads that are ready run first (a poll)."""
        me = self.here()
        nxt = self._ready()
        if nxt is not None:
            me.wait = _Wait("cond", what, pred=lambda: True)  # ready again at once
            try:
                self._hand(me, nxt)
            finally:
                me.wait = None

    def op(self, op_id, what):
        _check(self.block(_Wait("op", what, op=op_id)).rc, what)

    def any(self, comm, what):
        _check(self.block(_Wait("any", what, comm=comm)).rc, what)

    def fail(self, msg):
        """The rank fails with msg (its first failure), and every thread of
        it stops at its next turn."""
        if self.failed is None:
            self.failed = msg
            _bridge.end(self.st.gen, self.st.rank, msg)
            for t in self.threads:
                if not t.done and t is not self.current:
                    t.baton.release()


def _coop_here():
    """The rank's turn-taking when the calling thread holds the turn."""
    st = getattr(_local, "state", None)
    c = st.coop if st is not None else None
    return c if c is not None and c.here() is not None else None


class _Lock:
    """threading.Lock: a blocking acquire by a rank's thread lets the
    rank's other threads run; anywhere else, a plain lock."""

    def __init__(self):
        self._raw = _thread.allocate_lock()

    def acquire(self, blocking=True, timeout=-1):
        if self._raw.acquire(False):
            return True
        if not blocking:
            return False
        c = _coop_here()
        if c is None:
            return self._raw.acquire(True, timeout)
        return c.until(lambda: self._raw.acquire(False), timeout, f"a lock ({_where()})")

    def release(self):
        self._raw.release()

    def locked(self):
        return self._raw.locked()

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()

    def _at_fork_reinit(self):
        self._raw = _thread.allocate_lock()


def _sleep(seconds):
    c = _coop_here()
    if c is None:
        return _real["sleep"](seconds)
    if seconds <= 0:
        return c.yield_(f"time.sleep ({_where()})")
    c.until(lambda: False, seconds, f"time.sleep ({_where()})")


def _monotonic():
    c = _coop_here()
    if c is not None:
        return c.now
    now = _real["monotonic"]()
    st = getattr(_local, "state", None)
    if st is not None and st.coop is None:  # where a rank's clock starts, if it starts threads
        st.clock_read = now
    return now


def _thread_start(self):
    st = getattr(_local, "state", None)
    if st is None or not _bridge or _bridge.MESSAGE_BYTES <= 0:
        if st is not None:  # ranks as threads: one interpreter, no turn of their own
            raise RuntimeError(f"a rank starts a thread ({self.name}): under ppv fuzz py "
                               f"--ranks-as threads a rank's threads cannot take turns; run "
                               f"with --ranks-as processes (the default)")
        return _thread_start.real(self)
    if st.coop is None:
        st.coop = _Coop(st)
    c = st.coop
    if c.here() is None:
        raise RuntimeError(f"a thread starts a thread ({self.name}) while another holds the "
                           f"rank's turn")
    rec = _Thr(self.name, self.daemon)
    run = self.run

    def turn():
        c.by_ident[_thread.get_ident()] = rec
        try:
            rec.baton.acquire()
            if c.failed is not None:
                return
            _local.state = st
            try:
                run()
            except DistError:
                pass  # the run failed already: ppv reports it
            except BaseException as e:
                c.fail(f"thread {rec.name}: {type(e).__name__}: {e} ({_place(e, st.target)})")
        finally:
            rec.done = True
            _local.state = None
            if c.current is rec and c.failed is None:
                try:
                    c.switch(rec, leaving=True)
                except DistError:
                    pass
    self.run = turn
    c.threads.append(rec)
    self._ppv_thr = rec
    try:
        _thread_start.real(self)  # its thread waits for the turn before the first line of run
    except BaseException:
        c.threads.remove(rec)
        raise


def _thread_join(self, timeout=None):
    rec = getattr(self, "_ppv_thr", None)
    c = _coop_here()
    if rec is not None and c is not None:
        if not c.until(lambda: rec.done, timeout, f"join {rec.name} ({_where()})"):
            return
    return _thread_join.real(self, timeout)


def _install_turns():
    """Makes threading's and queue's waits, Thread.start and join,
    time.sleep and time.monotonic the ones above (before the user's file is
    imported, so its module-level locks and queues are of this kind too).
    Nothing changes for code outside a rank, or a rank without threads."""
    import queue
    import threading
    if getattr(threading, "_ppv_turns", False):
        return
    threading.Lock = _Lock
    threading._allocate_lock = _Lock
    threading._CRLock = None  # RLock then builds on _allocate_lock
    threading._time = _monotonic
    _thread_start.real = threading.Thread.start
    threading.Thread.start = _thread_start
    _thread_join.real = threading.Thread.join
    threading.Thread.join = _thread_join
    queue.SimpleQueue = queue._PySimpleQueue
    queue.time = _monotonic
    _time_mod.sleep = _sleep
    _time_mod.monotonic = _monotonic
    threading._ppv_turns = True


# ---- run by ppv: one thread a rank --------------------------------------------------------


def _place(exc, target):
    """Where exc was raised, in _where's terms: the innermost frame of its
    traceback in the file ppv runs, then the innermost user frame under it
    in a helper of another file."""
    tb = exc.__traceback__
    here = inner = None
    while tb is not None:
        fn = tb.tb_frame.f_code.co_filename
        if fn == target:
            here, inner = f"{os.path.basename(fn)}:{tb.tb_lineno}", None
        elif _user_file(fn):
            inner = f"{os.path.basename(fn)}:{tb.tb_lineno}"
        tb = tb.tb_next
    if here is None:
        return inner or "?"
    return here if inner is None else f"{here}<{inner}"


def _run_rank(function, rank, size, gen):
    """A rank (its process's main thread, or a thread of ppv's): waits for
    its turn, runs function(rank, size), and tells ppv how it ended."""
    global _ranks_here
    if _bridge.begin(gen, rank) != 0:
        _bridge.end(gen, rank, None)
        return
    _ranks_here += 1  # one rank runs at a time: no race
    _local.state = _State(rank, size, gen)
    _local.state.target = getattr(function, "_ppv_file", None) or getattr(
        getattr(function, "__code__", None), "co_filename", None)
    error = None
    try:
        function(rank, size)
        c = _local.state.coop
        if c is not None:  # as at a process's end: threading's exit hooks (a thread
            import threading  # pool's stop), then its threads (but daemons) finish first
            for hook in reversed(getattr(threading, "_threading_atexits", [])):
                hook()
            c.until(lambda: all(t.done or t.daemon for t in c.threads[1:]), None,
                    "the end of the rank's function, for its threads")
    except DistError as e:
        error = f"DistError: {e}"
    except BaseException as e:  # the rank's own failure, with its place
        error = f"{type(e).__name__}: {e} ({_place(e, _local.state.target)})"
    finally:
        _local.state = None
        _ranks_here -= 1
    _bridge.end(gen, rank, error)
