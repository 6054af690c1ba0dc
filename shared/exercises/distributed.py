"""Exercise checkers for notebook 11 (scaling out): shard a global batch by rank; average gradients by hand.

Import them from `shared.exercises`; see `shared.exercises.feedback` for how a checker reports. The gradient check
forks a few CPU processes that meet through a file in a temporary folder and form a real gloo group
(Linux, macOS, Colab). Its time limits are its own: each rank stops the learner's function after
FUNCTION_LIMIT_S seconds ("your function did not return within 30 s"), gloo stops a collective that waits for
another rank after COLLECTIVE_TIMEOUT_S, and the parent waits for the ranks' answers at most ANSWER_WAIT_S.
"""

from __future__ import annotations

import datetime
import math
import multiprocessing
import os
import sys
import tempfile
import time
from multiprocessing.connection import wait

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from .feedback import Checker, NotSolved, TimedOut, Wrong, exercise

COLLECTIVE_TIMEOUT_S = 20  # gloo's timeout: a collective that waits longer for another rank raises
FUNCTION_LIMIT_S = 30.0  # each rank's limit on the learner's function: longer than a collective's timeout, so a
#                          rank that waits in all_reduce for another gets gloo's error first, not this one
ANSWER_WAIT_S = 60.0  # the parent's wait for the ranks' answers, after which it gives up on them

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


def _grad_verdict(fn, rank: int, world_size: int, store: str) -> tuple[str, str]:
    """One rank: DDP's gradients, the learner's average_gradients(model), and the comparison -> (status, message)."""
    try:
        dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world_size,
                                timeout=datetime.timedelta(seconds=COLLECTIVE_TIMEOUT_S))
        model, x, y = _tiny_problem(rank, world_size)
        reference = DDP(_tiny_problem(rank, world_size)[0])
        nn.functional.cross_entropy(reference(x), y).backward()  # DDP averages the gradients across ranks
        weights = [p.detach().clone() for p in model.parameters()]
        nn.functional.cross_entropy(model(x), y).backward()
        local = [p.grad.clone() for p in model.parameters()]
        c = Checker(fn, time_limit=FUNCTION_LIMIT_S)  # a fork has no limit armed: each call gets this one
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
        return "ok", ""
    except NotSolved:
        return "not solved", ""
    except TimedOut as late:  # the learner's function never returned: say so, rather than blame the collectives
        return "too slow", str(late)
    except Wrong as wrong:
        return "wrong", str(wrong)
    except Exception as err:  # e.g. a collective that timed out because ranks disagreed
        return "wrong", f'case "world_size={world_size}, rank={rank}": {type(err).__name__}: {err}'


def _grad_worker(fn, rank: int, world_size: int, store: str, answer) -> None:
    """A forked rank: send the verdict through this rank's own pipe, then leave without any teardown."""
    os.environ.pop("WORLD_SIZE", None)  # a process group of our own, whatever the parent's environment says
    torch.set_num_threads(1)
    code = 1
    try:
        answer.send(_grad_verdict(fn, rank, world_size, store))  # written to the pipe now: no feeder thread
        code = 0
    finally:
        # Skip destroy_process_group and the interpreter's exit: freeing DDP's reducer and the gloo group in a
        # fork can block, and nothing is left to do: every collective has returned and the answer is sent.
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()  # the learner's prints
            except Exception:  # a closed or foreign stream must not keep the rank alive
                pass
        os._exit(code)


def _collect(readers: dict, deadline: float) -> dict:
    """rank -> (status, message) from each rank's pipe, until all answered, a rank died, or the deadline passed."""
    answers = {}
    while len(answers) < len(readers):
        ready = wait([r for rank, r in readers.items() if rank not in answers], timeout=deadline - time.monotonic())
        if not ready:
            break
        for rank, reader in readers.items():
            if reader in ready:
                try:
                    answers[rank] = reader.recv()
                except EOFError:  # the rank's process ended without an answer: the others cannot finish either
                    answers[rank] = ("wrong", f'case "world_size={len(readers)}": rank {rank} stopped without an '
                                              "answer: does your function end the process?")
                    return answers
    return answers


@exercise("average gradients with all_reduce", time_limit=math.inf)  # the ranks, not this process, run fn
def check_average_gradients(c: Checker) -> None:
    """fn(model): after backward on each rank's shard, make every p.grad the mean over all ranks (as DDP does)."""
    if "fork" not in multiprocessing.get_all_start_methods():
        c.fail("setup", "this check forks processes, which this system cannot do (Windows).",
               "run the notebook on Linux, macOS or Colab.")
    import torch._dynamo  # noqa: F401  DDP imports it on first use: once here, not again in every fork

    context = multiprocessing.get_context("fork")
    for world_size in (2, 3):
        with tempfile.TemporaryDirectory() as folder:  # rendezvous through a fresh file: no TCP port to race for
            readers, workers = {}, []
            for rank in range(world_size):
                reader, writer = context.Pipe(duplex=False)
                workers.append(context.Process(target=_grad_worker, daemon=True,
                                               args=(c.fn, rank, world_size, os.path.join(folder, "store"), writer)))
                workers[-1].start()
                writer.close()  # the rank holds the only writer, so its pipe reads EOF if it dies
                readers[rank] = reader
            answers = _collect(readers, time.monotonic() + ANSWER_WAIT_S)
            for w in workers:
                w.join(timeout=5)
                if w.is_alive():
                    w.kill()
                    w.join()
            for reader in readers.values():
                reader.close()
        for _, (status, message) in sorted(answers.items(), key=lambda a: (a[1][0] != "too slow", a[0])):
            if status == "too slow":  # first: the other ranks' errors (a collective that timed out) follow from it
                raise Wrong(message)
            if status == "not solved":
                raise NotSolved
            if status == "wrong":
                raise Wrong(message)
        if len(answers) < world_size:
            missing = sorted(set(range(world_size)) - set(answers))
            raise Wrong(f'case "world_size={world_size}": rank(s) {missing} did not finish within '
                        f"{ANSWER_WAIT_S:g} s: your function never returned there, or the ranks waited for each other. "
                        "Every rank must call all_reduce on the same tensors in the same order.")
        c.passed()
