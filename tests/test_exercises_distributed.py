"""Notebook 11 exercise checkers accept right answers and explain plausible wrong ones."""

import os

import torch
import torch.distributed as dist

from shared.distributed import shard
from shared.exercises.distributed import check_average_gradients, check_shard_for_rank
from tests.test_exercises import accepts, rejects


def stub(*args):
    raise NotImplementedError


def test_shard_for_rank(capsys):
    accepts(check_shard_for_rank, shard, capsys)  # the package's own (contiguous slices)

    def strided(batch, rank, world_size):  # every world_size-th row: also a fair, disjoint split
        if len(batch) % world_size:
            raise ValueError("uneven")
        return batch[rank::world_size]

    accepts(check_shard_for_rank, strided, capsys)
    rejects(check_shard_for_rank, lambda b, r, w: b[r * w : (r + 1) * w], capsys, "B // world_size rows")
    rejects(check_shard_for_rank, lambda b, r, w: b[: len(b) // w], capsys, "same rows")
    rejects(check_shard_for_rank, lambda b, r, w: b[r : r + len(b) // w], capsys, "must not overlap")
    rejects(check_shard_for_rank, lambda b, r, w: b, capsys, "only its own part")
    rejects(check_shard_for_rank, lambda b, r, w: b[r * (len(b) // w) : (r + 1) * (len(b) // w)], capsys,
            "raise ValueError")
    out = rejects(check_shard_for_rank, lambda b, r, w: 1 / 0, capsys, "ZeroDivisionError")
    assert "Traceback" not in out
    assert check_shard_for_rank(stub) is False and "not solved yet" in capsys.readouterr().out


def average(model):
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= dist.get_world_size()


def test_average_gradients(capsys):
    accepts(check_average_gradients, average, capsys)

    def no_divide(model):
        for p in model.parameters():
            dist.all_reduce(p.grad)

    def by_two(model):
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= 2

    def weights(model):
        for p in model.parameters():
            dist.all_reduce(p.data)
            p.data /= dist.get_world_size()

    rejects(check_average_gradients, no_divide, capsys, "divide by", "get_world_size")
    rejects(check_average_gradients, by_two, capsys, "not by a fixed 2")
    rejects(check_average_gradients, lambda m: None, capsys, "own gradients")
    rejects(check_average_gradients, weights, capsys, "not the weights")  # replicas hold equal weights
    rejects(check_average_gradients, lambda m: [p.data.mul_(0.5) for p in m.parameters()], capsys,
            "weights of 0.weight changed")
    rejects(check_average_gradients, lambda m: 1 / 0, capsys, "ZeroDivisionError")
    assert check_average_gradients(stub) is False and "not solved yet" in capsys.readouterr().out
    assert not dist.is_initialized() and torch.get_num_threads() >= 1  # the forks left this process alone


def test_average_gradients_reports_a_rank_that_dies(capsys):
    def exit_on_rank_0(model):
        if dist.get_rank() == 0:
            os._exit(3)
        average(model)

    rejects(check_average_gradients, exit_on_rank_0, capsys, "rank 0 stopped without an answer")
    accepts(check_average_gradients, average, capsys)  # and the next check starts afresh
