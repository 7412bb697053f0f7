"""A control plane as a team writes it against torch.distributed: rank 0
hands each of the other ranks a work item and gathers their answers, with
an isend posted before the broadcast that closes the round (valid under
torch with gloo). The gate (test_gates.py) runs it unchanged under
`ppv fuzz py control.py:main -n 3`."""
import torch
import torch.distributed as dist


def main(rank, world_size):
    dist.init_process_group("gloo")
    if rank == 0:
        for peer in range(1, world_size):
            dist.send(torch.full((4,), float(peer)), dst=peer)
        total = torch.zeros(4)
        for _ in range(1, world_size):
            answer = torch.zeros(4)
            dist.recv(answer)                 # from whichever rank answers first
            total += answer
    else:
        item = torch.zeros(4)
        dist.recv(item, src=0)
        pending = dist.isend(item * 2, dst=0)
        total = torch.zeros(4)
    dist.broadcast(total, src=0)              # before the isend is waited on
    if rank != 0:
        pending.wait()
    dist.destroy_process_group()
