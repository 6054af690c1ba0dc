"""Exercise checkers for notebook 11 (scaling out): shard a global batch by rank; average gradients by hand.

Import them from `shared.exercises`; see `shared.feedback` for how a checker reports. The gradient check
forks a few CPU processes that form a real gloo group on 127.0.0.1 (Linux, macOS, Colab).
"""

from __future__ import annotations

import datetime
import multiprocessing
import os
import socket

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from .feedback import Checker, NotSolved, Wrong, exercise

# ---------------------------------------------------------------- shard a global batch


@exercise("shard a global batch by rank")
def check_shard_for_rank(c: Checker) -> None:
    """fn(batch (B, T), rank, world_size) -> (B // world_size, T): disjoint shards that together cover the batch."""
    for B, T, world_size in ((8, 3, 2), (12, 5, 3), (6, 4, 1), (4, 2, 4)):
        case = f"B={B}, world_size={world_size}"
        batch = torch.arange(B)[:, None] * 100 + torch.arange(T)  # (B, T): row b holds b*100 + t
        seen = []
        for rank in range(world_size):
            got = c.call(f"{case}, rank={rank}", batch.clone(), rank, world_size)
            c.shape(got, (B // world_size, T), f"{case}, rank={rank}", "shard", "(B // world_size, T)",
                    hints={(world_size, T): "the shard holds B // world_size rows, not world_size rows.",
                           (B, T): "each rank keeps only its own part of the batch, not all of it."})
            if not all(any(torch.equal(row, r) for r in batch) for row in got):
                c.fail(f"{case}, rank={rank}", "the shard holds rows that are not rows of the batch.",
                       "slice whole rows of the batch (dim 0); do not change their contents.")
            seen += [int(row[0]) // 100 for row in got]
        repeated = sorted({b for b in seen if seen.count(b) > 1})
        if repeated:
            c.fail(case, f"rows {repeated} went to more than one rank, so other rows were never used.",
                   "rank r starts at row r * (B // world_size): shards must not overlap."
                   if len(repeated) < B // world_size else "every rank got the same rows: offset the slice by rank.")
        c.passed()
    case = "B=10, world_size=4"
    try:
        got = c.fn(torch.zeros(10, 2), 1, 4)
    except ValueError:
        c.passed()
        return
    except NotImplementedError:
        raise NotSolved from None
    except Exception as err:  # the learner's bug becomes feedback
        c.fail(case, f"your function raised {type(err).__name__}: {err}", "raise ValueError for a batch that "
               "does not split evenly.")
    c.fail(case, f"10 rows cannot be split evenly over 4 ranks, but your function returned "
           f"{type(got).__name__ if not isinstance(got, torch.Tensor) else tuple(got.shape)}.",
           "raise ValueError when B % world_size != 0: DDP averages the ranks' mean losses, so unequal shards "
           "would weigh rows unequally (and dropping rows silently loses data).")


# ---------------------------------------------------------------- average gradients by hand


def _tiny_problem(rank: int, world_size: int):
    """The same small model on every rank, and this rank's shard of one global batch of 12 rows."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    generator = torch.Generator().manual_seed(1)
    x, y = torch.randn(12, 4, generator=generator), torch.randint(3, (12,), generator=generator)
    size = 12 // world_size
    return model, x[rank * size : (rank + 1) * size], y[rank * size : (rank + 1) * size]  # (12 // W, 4), (12 // W,)


def _grad_worker(fn, rank: int, world_size: int, port: int, results) -> None:
    """One rank: DDP's gradients, the learner's average_gradients(model), and the comparison, sent as a message."""
    os.environ.pop("WORLD_SIZE", None)  # a process group of our own, whatever the parent's environment says
    torch.set_num_threads(1)
    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size,
                                timeout=datetime.timedelta(seconds=20))
        model, x, y = _tiny_problem(rank, world_size)
        reference = DDP(_tiny_problem(rank, world_size)[0])
        nn.functional.cross_entropy(reference(x), y).backward()  # DDP averages the gradients across ranks
        weights = [p.detach().clone() for p in model.parameters()]
        nn.functional.cross_entropy(model(x), y).backward()
        local = [p.grad.clone() for p in model.parameters()]
        c = Checker(fn)
        case = f"world_size={world_size}, rank={rank}"
        c.call(case, model)
        for (name, p), ref, own, w in zip(model.named_parameters(), reference.parameters(), local, weights):
            if not torch.equal(p.detach(), w):
                c.fail(case, f"the weights of {name} changed.", "average the gradients (p.grad), not the weights "
                       "(p.data); the optimizer changes the weights afterwards.")
            c.close(p.grad, ref.grad, case, f"{name}.grad", atol=1e-6,
                    variants=[(own, "these are this rank's own gradients: call dist.all_reduce(p.grad) (on the "
                                    "gradients, not the weights) so that every rank gets the sum over all ranks."),
                              (ref.grad * world_size, "all_reduce sums the gradients: divide by "
                                                      "dist.get_world_size() to get their mean."),
                              (ref.grad * world_size / 2, "divide by dist.get_world_size(), not by a fixed 2.")])
        results.put((rank, "ok", ""))
    except NotSolved:
        results.put((rank, "not solved", ""))
    except Wrong as wrong:
        results.put((rank, "wrong", str(wrong)))
    except Exception as err:  # e.g. a collective that timed out because ranks disagreed
        results.put((rank, "wrong", f'case "world_size={world_size}, rank={rank}": {type(err).__name__}: {err}'))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@exercise("average gradients with all_reduce")
def check_average_gradients(c: Checker) -> None:
    """fn(model): after backward on each rank's shard, make every p.grad the mean over all ranks (as DDP does)."""
    if "fork" not in multiprocessing.get_all_start_methods():
        c.fail("setup", "this check forks processes, which this system cannot do (Windows).",
               "run the notebook on Linux, macOS or Colab.")
    import torch._dynamo  # noqa: F401  DDP imports it on first use: once here, not again in every fork

    context = multiprocessing.get_context("fork")
    for world_size in (2, 3):
        results, port = context.Queue(), _free_port()
        workers = [context.Process(target=_grad_worker, args=(c.fn, r, world_size, port, results))
                   for r in range(world_size)]
        for w in workers:
            w.start()
        try:
            answers = sorted(results.get(timeout=90) for _ in workers)
        except Exception:  # queue.Empty: a rank never answered
            answers = [(0, "wrong", f'case "world_size={world_size}": the ranks did not finish within 90 s. Every '
                        "rank must call all_reduce on the same tensors in the same order.")]
        for w in workers:
            w.join(timeout=10)
            if w.is_alive():
                w.kill()
        for _, status, message in answers:
            if status == "not solved":
                raise NotSolved
            if status == "wrong":
                raise Wrong(message)
        c.passed()
