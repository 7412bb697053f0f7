"""A script written against torch.distributed, run unchanged: by torchrun
(RANK, WORLD_SIZE, MASTER_* from the environment, gloo) and by `ppv fuzz py
tests/python/torch_script.py -n 3`, which runs it as each rank's __main__.
Its module state is each rank's own, and fresh in every run. VARIANT (an
environment variable) seeds the bad input test_torch_corpus.py checks."""
import os
import torch
import torch.distributed as dist

STATE = {"calls": 0}   # module state: per rank in script mode


def main():
    variant = os.environ.get("PPV_SCRIPT_VARIANT", "")
    if variant == "fork":
        os.fork()
    if variant != "no_init":
        dist.init_process_group("mpi" if variant == "mpi" else "gloo", init_method="env://")
    rank, size = dist.get_rank(), dist.get_world_size()
    if variant == "signature" and rank == 1:
        dist.send(torch.zeros(1))                      # no dst: torch's own TypeError
    assert int(os.environ["RANK"]) == rank and int(os.environ["WORLD_SIZE"]) == size
    STATE["calls"] += 1
    assert STATE["calls"] == 1, STATE
    if rank == 0:
        works = [dist.isend(torch.tensor([float(p)]), p) for p in range(1, size)]
        for _ in range(size - 1):
            t = torch.zeros(1)
            src = dist.recv(t, src=None)
            assert t.item() == 10 * src
        for w in works:
            w.wait()
    else:
        t = torch.zeros(1)
        dist.recv(t, 0)
        dist.send(t * 10, 0)
    x = torch.ones(2) * rank
    dist.all_reduce(x)
    assert x.tolist() == [3.0, 3.0]
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
