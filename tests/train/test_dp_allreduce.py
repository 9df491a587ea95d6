"""The counter-test of tests/train/test_dp.py: a plain all-reduce (torch.distributed, gloo, 1-3
processes) of the SAME per-micro-batch gradients, each process summing its share in worker
order, gives different bits for different worker counts — so "same bits for any worker
count" is a property of lutcore's exact reduction, and the test of it can fail."""
import os
import socket

import numpy as np

import torch  # the test extra installs it: a missing torch is an error, not a skip
import torch.distributed as dist
import torch.multiprocessing as mp

from lutcore.models.mamba import MambaConfig, MambaLM
from lutcore.train.exactsum import exact_sum

N_MICRO = 12


def micro_grads():
    """The flattened float32 gradient of each of 12 micro-batches (1 row each) of a tiny MambaLM."""
    model = MambaLM(MambaConfig(d_model=16, n_layer=2, vocab_size=64, d_state=4, seed=1))
    rng = np.random.default_rng(5)
    out = []
    for _ in range(N_MICRO):
        t = rng.integers(0, 64, (1, 17))
        _, g = model.loss_and_grads(t[:, :-1], t[:, 1:])
        out.append(np.concatenate([g[k].reshape(-1) for k in sorted(g)]).astype(np.float32))
    return out


def _rank(rank, world, port, grads, q):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    mine = [g for j, g in enumerate(grads) if j % world == rank]
    local = torch.zeros(grads[0].size, dtype=torch.float32)
    for g in mine:                                     # this worker's share, in order
        local += torch.from_numpy(g)
    dist.all_reduce(local, op=dist.ReduceOp.SUM)
    if rank == 0:
        q.put(local.numpy().tobytes())
    dist.destroy_process_group()


def allreduce(grads, world):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    mp.start_processes(_rank, args=(world, port, grads, q), nprocs=world, join=True, start_method="spawn")
    return q.get(timeout=60)


def test_plain_allreduce_bits_depend_on_the_worker_count_exact_sum_does_not():
    grads = micro_grads()
    plain = {w: allreduce(grads, w) for w in (1, 2, 3)}
    assert len(set(plain.values())) > 1, "gloo all-reduce gave the same bits for 1, 2 and 3 workers"
    exact = []
    for w in (1, 2, 3):
        from lutcore.train.exactsum import ExactSum
        accs = []
        for r in range(w):
            a = ExactSum(grads[0].shape)
            for j in range(r, N_MICRO, w):
                a.add(grads[j])
            accs.append(a)
        for a in accs[1:]:
            accs[0].merge(a)
        exact.append(accs[0].result().tobytes())
    assert len(set(exact)) == 1 and exact[0] == exact_sum(grads).tobytes()
