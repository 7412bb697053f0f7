"""Ranks that start threads of their own (tests/python/test_dist.py): the
rank's threads take turns under ppv, each blocking call of one lets the
others run, and what goes wrong is named in the program's terms."""
import queue
import threading
import time

import numpy as np

import ppv.dist as dist


def _f(v):
    return np.array([v], dtype=np.float32)


def results_in_send_order(rank, size):
    """A seeded bug: rank 0's sender thread sends to ranks 1 and 2 in turn
    and its main thread assumes the results come back in that order; they
    come in whichever order the ranks answer."""
    if rank == 0:
        t = threading.Thread(target=lambda: [dist.send(_f(k), 1 + k % 2) for k in range(2)],
                             name="sender")
        t.start()
        for k in range(2):
            r = _f(0)
            src = dist.recv(r, src=None)
            if src != 1 + k % 2:
                raise RuntimeError(f"result {k} came from rank {src}, not {1 + k % 2}")
        t.join()
    else:
        e = _f(0)
        dist.recv(e, 0)
        dist.send(e, 0)


def locks_taken_in_both_orders(rank, size):
    """Two threads of rank 0 take two locks in opposite orders."""
    if rank == 0:
        a, b = threading.Lock(), threading.Lock()

        def other():
            with b:
                with a:
                    pass
        a.acquire()
        t = threading.Thread(target=other, name="other")
        t.start()
        b.acquire()
        t.join()


def a_thread_raises(rank, size):
    if rank == 1:
        def bad():
            raise ValueError("a thread's own bug")
        t = threading.Thread(target=bad, name="bad")
        t.start()
        t.join()


def both_threads_wait_for_rank_1(rank, size):
    """A world deadlock through threads: rank 0's two threads each wait for
    rank 1, which waits for rank 0."""
    if rank == 0:
        t = threading.Thread(target=lambda: dist.recv(_f(0), 1), name="listener")
        t.start()
        dist.recv(_f(0), 1)
        t.join()
    elif rank == 1:
        dist.recv(_f(0), 0)


def heartbeats_on_the_rank_clock(rank, size):
    """A heartbeat thread beats every 0.5 s of the rank's clock while the
    main thread sleeps 2 s: time.monotonic and the waits are virtual, so
    the count is the same in every run."""
    if rank == 0:
        stop = threading.Event()
        beats = []

        def beat():
            while not stop.wait(0.5):
                beats.append(time.monotonic())
        t = threading.Thread(target=beat, name="heartbeat", daemon=True)
        start = time.monotonic()
        sum(range(2000000))  # real time passes before the first thread: the clock goes on from start
        t.start()
        time.sleep(2.0)
        stop.set()
        t.join()
        print(f"beats {len(beats)} at {[round(b - start, 3) for b in beats]}, "
              f"slept {time.monotonic() - start:.3f}")


def a_queue_and_its_timeout(rank, size):
    """queue.Queue.get with a timeout ends on the rank's clock; a worker
    thread feeds the queue from what rank 1 sends."""
    if rank == 0:
        q = queue.Queue()

        def feed():
            a = _f(0)
            dist.recv(a, 1)
            q.put(float(a[0]))
        t = threading.Thread(target=feed, name="feeder")
        t.start()
        print("got", q.get(timeout=30))
        try:
            q.get(timeout=1.5)
        except queue.Empty:
            print("empty after", round(time.monotonic() % 1e9 * 0, 1) + 1.5)
        t.join()
    elif rank == 1:
        dist.send(_f(7), 0)


def two_calls_complete_together(rank, size):
    """Both of rank 0's receives (one a thread's) complete before rank 0
    runs again; a third thread's long timeout must not end for that, nor
    the next receive's wait be cut short."""
    if rank == 0:
        done = threading.Event()
        timed_out = []

        def watch():
            if not done.wait(100):
                timed_out.append("at its deadline")
        w = threading.Thread(target=watch, name="watch")
        w.start()
        a = threading.Thread(target=lambda: dist.recv(_f(0), 1), name="from1")
        a.start()
        dist.recv(_f(0), 2)
        a.join()
        dist.send(_f(1), 1)  # rank 1's go: its last message comes after
        last = _f(0)
        dist.recv(last, 1)
        done.set()
        w.join()
        if timed_out or last[0] != 9:
            raise RuntimeError(f"the watch timed out ({timed_out}), the last value {last[0]}")
    else:
        dist.send(_f(rank), 0)
        if rank == 1:
            dist.recv(_f(0), 0)
            dist.send(_f(9), 0)


def two_threads_receive_from_any_rank(rank, size):
    """Rank 0's main thread takes results from any rank (tag 0) while its
    telemetry thread takes reports from any rank (tag 5) and acknowledges
    each; ranks 1 and 2 report, wait for the acknowledgement, then send
    their result. Each thread's receive from any rank must wake it."""
    if rank == 0:
        def telemetry():
            for _ in range(2):
                r = _f(0)
                src = dist.recv(r, src=None, tag=5)
                dist.send(_f(src), src, tag=6)
        t = threading.Thread(target=telemetry, name="telemetry")
        t.start()
        got = set()
        for _ in range(2):
            r = _f(0)
            got.add(dist.recv(r, src=None))
        t.join()
        if got != {1, 2}:
            raise RuntimeError(f"results from {sorted(got)}, not from ranks 1 and 2")
    else:
        dist.send(_f(rank), 0, tag=5)
        dist.recv(_f(0), 0, tag=6)
        dist.send(_f(rank), 0)


_KEPT = []


def a_thread_pool_left_running(rank, size):
    """A thread pool's workers send for rank 0, and the pool is never shut
    down: as at a process's end, threading's exit hook stops its workers,
    and the rank ends."""
    from concurrent.futures import ThreadPoolExecutor
    if rank == 0:
        pool = ThreadPoolExecutor(max_workers=2)
        _KEPT.append(pool)  # alive past the function: only the exit hook stops it
        futures = [pool.submit(dist.send, _f(k), 1) for k in range(3)]
        for f in futures:
            f.result()
    elif rank == 1:
        got = []
        for _ in range(3):
            a = _f(-1)
            dist.recv(a, 0)
            got.append(float(a[0]))
        if sorted(got) != [0.0, 1.0, 2.0]:
            raise RuntimeError(f"rank 1 got {got}")
