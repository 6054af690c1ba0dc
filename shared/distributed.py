"""Scaling out: data-parallel training under torchrun (DDP), gradient accumulation and mixed precision.

`torchrun --nproc_per_node=N script.py` starts N copies of a script and tells each one its place through
environment variables (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT). `distributed()` joins that
process group (gloo on CPU, nccl on CUDA) and always leaves it; a plain `python script.py` gets one process
and no group, so the same script runs both ways. `shared.training.train` uses the rest: it shards each
global batch by rank, splits it into micro-batches, runs the forward pass under autocast and reduces the
logged loss across ranks.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel as DDP

from .checkpoint import unwrap as unwrap  # re-exported: the plain model inside a DDP (or compile) wrapper
from .muon import bf16_is_native
from .runtime import get_device
from .validation import (
    check_env_int,
    check_finite_step,
    check_int,
    check_loss_fn_result,
    check_optional_positive_number,
    check_positive_int,
    finite_flags,
)

PRECISIONS = ("fp32", "bf16", "fp16")
_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass(frozen=True)
class Ranks:
    """This process's place: rank in 0..world_size-1, local_rank on its machine, backend, device."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    backend: str | None = None  # None: no process group (a plain single-process run)
    device: torch.device = torch.device("cpu")

    @property
    def is_main(self) -> bool:
        """Rank 0 alone writes checkpoints, prints progress and reports results."""
        return self.rank == 0


def current_ranks() -> Ranks:
    """The Ranks of the process group this process has joined (rank 0 of 1 when there is none)."""
    if not (dist.is_available() and dist.is_initialized()):
        return Ranks()
    local = int(os.environ.get("LOCAL_RANK", dist.get_rank()))
    backend = dist.get_backend()
    device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")
    return Ranks(dist.get_rank(), dist.get_world_size(), local, backend, device)


def init_distributed(backend: str = "auto", device: str | torch.device = "auto") -> Ranks:
    """Join the group torchrun described in the environment; without WORLD_SIZE, return a single process."""
    if backend not in ("auto", "gloo", "nccl"):
        raise ValueError(f"backend must be 'auto', 'gloo' or 'nccl', got {backend!r}")
    if "WORLD_SIZE" not in os.environ:  # started by plain python, not by torchrun
        return Ranks(device=get_device(device))
    world_size = check_env_int("WORLD_SIZE", os.environ, 1, meaning=" (torchrun sets it: the number of processes)")
    rank = check_env_int("RANK", os.environ, 0, world_size, " (torchrun sets it with WORLD_SIZE: this process's place)")
    local_rank = check_env_int("LOCAL_RANK", os.environ) if "LOCAL_RANK" in os.environ else rank
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() and get_device(device).type == "cuda" else "gloo"
    if backend == "nccl":  # one GPU per process: the process on local rank i drives cuda:i
        torch.cuda.set_device(local_rank)
        where = torch.device("cuda", local_rank)
    else:
        where = torch.device("cpu") if device == "auto" else torch.device(device)
    dist.init_process_group(backend, rank=rank, world_size=world_size)  # env://: MASTER_ADDR, MASTER_PORT
    return Ranks(rank, world_size, local_rank, backend, where)


@contextmanager
def distributed(backend: str = "auto", device: str | torch.device = "auto") -> Iterator[Ranks]:
    """with distributed() as ranks: ... — join the group, and destroy it on success and on error alike.

    On success every rank waits at a barrier first, so none leaves while another still reduces.
    """
    ranks = init_distributed(backend, device)
    try:
        yield ranks
        if dist.is_initialized():
            dist.barrier()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def wrap(model: nn.Module, ranks: Ranks | None = None) -> nn.Module:
    """DistributedDataParallel(model) inside a process group; the model itself when there is none."""
    ranks = current_ranks() if ranks is None else ranks
    if ranks.backend is None:
        return model
    device_ids = [ranks.device.index] if ranks.device.type == "cuda" else None
    return DDP(model, device_ids=device_ids)


def shard(batch: Any, index: int, count: int) -> Any:
    """The index-th of `count` equal, disjoint slices along dim 0 of every tensor in a (nested) batch.

    batch (B, ...) -> (B // count, ...); tuples (named ones too), lists and dicts of tensors are sliced alike.
    """
    check_positive_int("count", count)
    check_int("index", index, minimum=0)
    if index >= count:
        raise ValueError(f"need 0 <= index < count, got index={index!r}, count={count!r}")
    if isinstance(batch, Tensor):
        if batch.dim() == 0 or batch.size(0) % count:
            raise ValueError(f"batch size {tuple(batch.shape)[:1]} must be divisible by {count} to shard it evenly "
                             "(count: the number of ranks, or micro_batches)")
        size = batch.size(0) // count
        return batch[index * size : (index + 1) * size]  # (B // count, ...)
    if isinstance(batch, (tuple, list)):
        parts = [shard(b, index, count) for b in batch]
        return type(batch)(*parts) if hasattr(batch, "_fields") else type(batch)(parts)  # a NamedTuple takes fields
    if isinstance(batch, dict):
        return {k: shard(v, index, count) for k, v in batch.items()}
    raise TypeError(f"batch must be a tensor or a tuple/list/dict of tensors, got {type(batch).__name__}")


def shard_batches(batch_fn: Callable[[int], Any], ranks: Ranks | None = None) -> Callable[[int], Any]:
    """batch_fn(step) -> this rank's shard of the global batch: every rank draws the same batch, keeps its part."""
    ranks = current_ranks() if ranks is None else ranks
    return lambda step: shard(batch_fn(step), ranks.rank, ranks.world_size)


def all_reduce_sum(*values: float) -> list[float]:
    """Sum each value over all ranks (float64); the values themselves without a process group."""
    if not (dist.is_available() and dist.is_initialized()):
        return [float(v) for v in values]
    tensor = torch.tensor([float(v) for v in values], dtype=torch.float64, device=current_ranks().device)  # (n,)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor.tolist()


def all_gather_object(value: Any) -> list:
    """[rank 0's value, rank 1's value, ...] of any picklable value; [value] without a process group."""
    if not (dist.is_available() and dist.is_initialized()):
        return [value]
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, value)
    return gathered


def all_reduce_max(value: float) -> float:
    """The largest value over all ranks, so that every rank takes the same decision (e.g. time is up)."""
    if not (dist.is_available() and dist.is_initialized()):
        return float(value)
    tensor = torch.tensor([value], dtype=torch.float64, device=current_ranks().device)  # (1,)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return float(tensor)


def auto_precision(device_type: str, bf16_supported: bool) -> str:
    """What 'auto' picks: on CUDA bf16 where the GPU has it in hardware (compute capability 8.0, Ampere, and later:
    shared.muon.bf16_is_native), else fp16 with the GradScaler (a T4 is 7.5); fp32 elsewhere.

    CPUs get fp32 even where autocast accepts bf16: a CPU without native bf16 instructions can run bf16 matmuls
    several times slower than fp32 (notebook 11 times both on its CPU), and there is no memory to save that matters.
    """
    if device_type != "cuda":
        return "fp32"
    return "bf16" if bf16_supported else "fp16"


class Precision:
    """The forward pass under torch.autocast(dtype); fp16 also scales the loss with torch.amp.GradScaler."""

    def __init__(self, name: str = "auto", device: str | torch.device = "cpu") -> None:
        device_type = torch.device(device).type
        if name == "auto":
            # not torch.cuda.is_bf16_supported(): by default it also says True where bf16 is emulated (a T4)
            bf16 = device_type == "cuda" and torch.cuda.is_available() and bf16_is_native(device)
            name = auto_precision(device_type, bf16)
        if name not in PRECISIONS:
            raise ValueError(f"precision must be 'auto' or one of {PRECISIONS}, got {name!r}")
        self.name, self.device_type, self.dtype = name, device_type, _DTYPES[name]
        self.scaler = torch.amp.GradScaler(device_type) if name == "fp16" else None  # bf16 has fp32's range

    def __repr__(self) -> str:
        return f"Precision({self.name!r}, device_type={self.device_type!r}, scaler={self.scaler is not None})"

    def autocast(self):
        """Context for the forward pass and loss: matmuls in self.dtype, reductions kept in fp32."""
        if self.name == "fp32":
            return nullcontext()
        return torch.autocast(self.device_type, dtype=self.dtype)

    def backward(self, loss: Tensor) -> None:
        """loss.backward(), through the scaler for fp16 (small gradients would underflow to zero)."""
        (loss if self.scaler is None else self.scaler.scale(loss)).backward()

    def step(self, optimizer: torch.optim.Optimizer, grad_clip: float | None, loss: Tensor | None = None,
             at_step: int | None = None) -> Tensor:
        """Clip the (unscaled) gradients to `grad_clip` and step; returns the 0-d gradient norm before clipping.

        grad_clip None measures the norm without clipping. With fp16 the scaler skips a step whose gradients
        hold inf/NaN and lowers its scale. Without a scaler, given the step number `at_step` (and its `loss`, if
        it is to be checked too), a non-finite loss or gradient norm on any rank raises FloatingPointError on
        every rank before the weights change. Every rank must take this path alike (one precision for all).
        """
        check_grad_clip(grad_clip)
        params = [p for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        if self.scaler is not None:
            self.scaler.unscale_(optimizer)  # first: clip_grad_norm_ must see the real gradients
        norm = nn.utils.clip_grad_norm_(params, math.inf if grad_clip is None else grad_clip)
        if self.scaler is None:
            if at_step is not None:  # every rank of a group stops together: one rank's NaN is all ranks' NaN
                finite = finite_flags(loss, norm)
                if dist.is_available() and dist.is_initialized():  # on the backend's device (NCCL: this GPU)
                    finite = finite.to(current_ranks().device)
                    dist.all_reduce(finite, op=dist.ReduceOp.MIN)
                check_finite_step(loss, norm, at_step, finite)
            optimizer.step()
        else:
            self.scaler.step(optimizer)
            self.scaler.update()
        return norm


def check_grad_clip(grad_clip: float | None) -> float | None:
    """grad_clip must be None (no clipping) or a finite number > 0: a negative one would reverse the update."""
    return check_optional_positive_number("grad_clip", grad_clip, " (None: measure the gradient norm, do not clip)")


def backward_micro_batches(
    model: nn.Module, loss_fn: Callable, batch: Any, micro_batches: int, precision: Precision
) -> tuple[Tensor, Tensor]:
    """Forward and backward over `micro_batches` equal slices of `batch`, summing gradients.

    Every token weighs the same, as in one pass over the whole batch, whatever the slices' token counts.
    Each micro-batch's mean loss weighs n / total: its tokens over the batch's, estimated as the count so
    far times micro_batches / (micro-batches so far); when the estimate changes, the gradients summed so
    far are rescaled to it. The last micro-batch knows the true total, so the result is exactly the mean
    over all tokens. With equal counts (full blocks of text) the estimate is right from the start: each
    mean loss counts 1 / micro_batches and the rescaling factor is 1, so fp16's values stay in range.
    Under DDP each rank's gradient is the mean over its own tokens and DDP averages the ranks: ranks weigh
    the same, whatever their token counts. Every micro-step but the last runs inside model.no_sync():
    gradients are all-reduced once per step, not once per micro-step.
    Returns (sum over micro-batches of loss * tokens, detached; total tokens). A micro-batch without tokens
    (every target ignored: its mean loss is NaN) adds 0, not NaN.
    """
    check_positive_int("micro_batches", micro_batches)
    loss_sum, tokens, estimate = None, 0, None
    for i in range(micro_batches):
        part = batch if micro_batches == 1 else shard(batch, i, micro_batches)
        sync = i == micro_batches - 1 or not isinstance(model, DDP)
        with nullcontext() if sync else model.no_sync():
            with precision.autocast():
                loss, n = check_loss_fn_result(loss_fn(model, part))
            n = torch.as_tensor(n, device=loss.device)  # no sync: n may be a tensor on the GPU
            seen = tokens + n
            total = (seen * micro_batches / (i + 1)).clamp(min=1)  # the batch's tokens: exact at the last
            if i:
                for p in model.parameters():  # the gradients so far were divided by the last estimate
                    if p.grad is not None:
                        p.grad.mul_(estimate / total)
            precision.backward(loss * (n / total))
            estimate = total
        weighted = torch.where(n > 0, loss.detach().float() * n, 0.0)
        loss_sum, tokens = (weighted if loss_sum is None else loss_sum + weighted), seen
    return loss_sum, tokens
