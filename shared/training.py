"""Training: loss, optimizers (AdamW; Muon with AdamW), learning-rate schedules and one loop with tqdm and history.

The loop asks `batch_fn(step)` for each batch, so data can be made on the fly and a resumed run sees
exactly the batches the uninterrupted run would have seen.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from tqdm.auto import tqdm
from tqdm.notebook import tqdm_notebook

from .checkpoint import rng_state, unwrap
from .distributed import (
    Precision,
    all_gather_object,
    all_reduce_max,
    all_reduce_sum,
    backward_micro_batches,
    check_grad_clip,
    current_ranks,
)
from .history import History
from .muon import Muon
from .runtime import eval_mode
from .validation import (
    check_betas,
    check_choice,
    check_finite,
    check_float_tensor,
    check_instance,
    check_int,
    check_optional_positive_number,
    check_positive_int,
    describe,
    is_integer_tensor,
)

Schedule = Callable[[int, float], float]  # (step, fraction of the run done) -> learning-rate multiplier


def lm_loss(
    logits: Tensor, targets: Tensor, ignore_index: int = -100, label_smoothing: float = 0.0
) -> tuple[Tensor, Tensor]:
    """Mean cross-entropy over the targets that are not `ignore_index`, and how many there were.

    The count is a 0-d tensor on the targets' device (reading it as an int would wait for the GPU).
    `label_smoothing` eps trains towards (1 - eps) on the target plus eps / V on every class (the paper: 0.1).
    """
    check_float_tensor("logits", logits, min_dim=2)  # (..., V)
    if not is_integer_tensor(targets):
        raise TypeError(f"targets must be an integer tensor of class ids, got {describe(targets)}")
    if logits.shape[:-1] != targets.shape:
        raise ValueError(f"logits (B, T, V) {tuple(logits.shape)} and targets (B, T) {tuple(targets.shape)} disagree")
    if not 0.0 <= label_smoothing < 1.0:
        raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing!r}")
    try:
        loss = F.cross_entropy(logits.flatten(0, -2), targets.flatten(), ignore_index=ignore_index,
                               label_smoothing=label_smoothing)
    except IndexError as err:  # on a CPU; on CUDA an id out of range is a device-side assert
        raise IndexError(f"targets must hold ids in 0..{logits.shape[-1] - 1} (the logits' last dimension, V) or "
                         f"ignore_index={ignore_index}: {err}") from None
    return loss, (targets != ignore_index).sum()


def noam_schedule(d_model: int, warmup: int) -> Schedule:
    """The paper's schedule: lr = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5) (use base lr 1.0)."""
    for name, value in (("d_model", d_model), ("warmup", warmup)):
        check_int(f"noam_schedule: {name}", value, meaning=" (the paper uses d_model=512, warmup=4000 steps)")
    return lambda step, frac: d_model**-0.5 * min((step + 1) ** -0.5, (step + 1) * warmup**-1.5)


def warmup_cosine(warmup: int, min_ratio: float = 0.1) -> Schedule:
    """Linear warm-up to the peak over `warmup` steps, then cosine from 1 to `min_ratio` over the remaining steps."""
    check_int("warmup", warmup, minimum=0, meaning=" (steps of linear warm-up; 0: none)")
    if check_finite("min_ratio", min_ratio, 0.0, " (the final lr as a fraction of the peak)") > 1.0:
        raise ValueError(f"min_ratio must be in [0, 1] (the final lr as a fraction of the peak), got {min_ratio!r}")

    def schedule(step: int, frac: float) -> float:
        if step < warmup:
            return (step + 1) / warmup
        # the run has about step / frac steps; decay over the part after warm-up
        denominator = step - warmup * frac
        done = frac * (step - warmup) / denominator if denominator > 0 else float(frac >= 1.0)
        cosine = 0.5 * (1.0 + math.cos(math.pi * min(max(done, 0.0), 1.0)))
        return min_ratio + (1.0 - min_ratio) * cosine

    return schedule


def make_adamw(model: nn.Module, lr: float, weight_decay: float = 0.1, betas=(0.9, 0.95)) -> torch.optim.AdamW:
    """AdamW that decays only the weight matrices of Linear layers (not biases, norms or embeddings)."""
    check_finite("lr", lr, 0.0, " (the peak learning rate)")
    check_finite("weight_decay", weight_decay, 0.0, " (AdamW's decoupled weight decay; 0: none)")
    betas = check_betas("betas", betas)
    params = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW(_adamw_groups(model, params, weight_decay), lr=lr, betas=betas)


def _adamw_groups(model: nn.Module, params: list[Tensor], weight_decay: float) -> list[dict]:
    """`params` in two groups: Linear weights decayed; biases, norms and embeddings (a tied head too) not."""
    decay_ids = {id(m.weight) for m in model.modules() if isinstance(m, nn.Linear)}
    decay_ids -= {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}  # tied weights stay undecayed
    return [
        {"params": [p for p in params if id(p) in decay_ids], "weight_decay": weight_decay},
        {"params": [p for p in params if id(p) not in decay_ids], "weight_decay": 0.0},
    ]


class MuonWithAdamW:
    """Two optimizers stepped as one: Muon for the hidden matrices, AdamW for the rest (see make_muon).

    It offers what train(), fp16's GradScaler and the checkpoints use of an optimizer:
    - `param_groups`: Muon's groups, then AdamW's. train() sets each group's lr from its own base_lr, so
      both follow the schedule (history.lr logs the first group's: Muon's). GradScaler unscales every
      gradient through this list and checks them all for inf/NaN: it steps both optimizers or neither,
      with one scaler.update(), so Precision.step needs nothing new.
    - `zero_grad()` and `step()`: both optimizers.
    - `state_dict()` / `load_state_dict()`: both states, as {"muon": ..., "adamw": ...}.
    """

    def __init__(self, muon: torch.optim.Muon, adamw: torch.optim.AdamW) -> None:
        self.muon = check_instance("muon", muon, torch.optim.Muon)
        self.adamw = check_instance("adamw", adamw, torch.optim.AdamW)
        stepped_by_both = {id(p) for g in muon.param_groups for p in g["params"]} & {
            id(p) for g in adamw.param_groups for p in g["params"]}
        if stepped_by_both:  # a tied weight listed twice would be stepped twice (and unscaled twice in fp16)
            raise ValueError(f"{len(stepped_by_both)} parameter(s) are in both optimizers; each belongs in one")

    def __repr__(self) -> str:
        count = lambda opt: sum(len(g["params"]) for g in opt.param_groups)  # noqa: E731
        ns = ""
        if isinstance(self.muon, Muon):  # the dtype its Newton-Schulz takes on the matrices' device
            first = self.muon.param_groups[0]["params"][0]
            ns = f", Newton-Schulz in {str(self.muon.dtype_for(first.device)).removeprefix('torch.')}"
        return f"MuonWithAdamW(Muon: {count(self.muon)} matrices{ns}, AdamW: {count(self.adamw)} tensors)"

    @property
    def param_groups(self) -> list[dict]:
        return self.muon.param_groups + self.adamw.param_groups

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.muon.zero_grad(set_to_none)
        self.adamw.zero_grad(set_to_none)

    def step(self, closure=None) -> None:
        if closure is not None:  # it would run the forward and backward pass once per optimizer
            raise ValueError("MuonWithAdamW.step takes no closure")
        self.muon.step()
        self.adamw.step()

    def state_dict(self) -> dict:
        return {"muon": self.muon.state_dict(), "adamw": self.adamw.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        if not isinstance(state, dict) or set(state) != {"muon", "adamw"}:
            keys = sorted(state) if isinstance(state, dict) else describe(state)
            raise ValueError(f"expected a MuonWithAdamW state_dict {{'muon': ..., 'adamw': ...}}, got keys {keys}: "
                             "was it saved from another optimizer (e.g. make_adamw's)?")
        muon_before = copy.deepcopy(self.muon.state_dict())  # torch replaces the state on load; a copy stays safe
        self.muon.load_state_dict(state["muon"])
        try:
            self.adamw.load_state_dict(state["adamw"])
        except Exception:  # all or nothing: leave Muon as it was, not half loaded
            self.muon.load_state_dict(muon_before)
            raise


def make_muon(
    model: nn.Module,
    lr: float,
    adamw_lr: float | None = None,
    weight_decay: float = 0.1,
    betas=(0.9, 0.95),
    momentum: float = 0.95,
    adjust_lr_fn: str = "match_rms_adamw",
    newton_schulz_dtype: torch.dtype | None = None,
) -> MuonWithAdamW:
    """Muon (shared.muon.Muon: torch.optim.Muon's algorithm) for the 2-D weights inside `model.blocks`, AdamW for
    every other parameter.

    Where each parameter goes (shared.gpt.GPT):
    - Muon (Jordan et al. 2024): each 2-D weight inside the blocks, i.e. the attention projections
      (w_q, w_k, w_v or the fused w_qkv, and w_o) and the feed-forward linears (linear1, gate, linear2),
      decayed by `weight_decay`.
    - AdamW (at `adamw_lr`; None: `lr`) with make_adamw's grouping: the token embedding and the LM head,
      which GPT ties to it (one tensor, so AdamW steps it once, undecayed), a learned position table, the
      norms' gains and any biases. A DDP-wrapped model is split as the model inside it.

    Why: Muon replaces each matrix's momentum update by the nearest semi-orthogonal matrix (U Vᵀ from the
    update's SVD U S Vᵀ, approximated by 5 Newton-Schulz iterations), so that no few directions dominate
    the step. That needs a matrix, so vectors (gains, biases) stay on AdamW. The embedding and the head
    are matrices too, but Jordan et al. found that transformers train best with AdamW on both. For the
    embedding this follows from the modular norm theory (Large et al. 2024): its input is a one-hot token,
    so the theory measures it by the size of each token's vector (a row), not by its singular values. For
    the head, their write-up says, it does not follow from the theory: it is what worked in practice.

    adjust_lr_fn scales Muon's lr per matrix of shape (A, B), as torch.optim.Muon documents:
    - "match_rms_adamw" (the default; Liu et al. 2025, "Muon is Scalable for LLM Training"): lr * 0.2 *
      sqrt(max(A, B)). An orthogonalised update has RMS about sqrt(1 / max(A, B)); this scaling gives it
      an RMS of 0.2, about that of AdamW's updates, so AdamW's learning rate and weight decay carry over.
    - "original" (Jordan et al.): lr * sqrt(max(1, A / B)), which wants a larger lr (0.02 in their code).
    Muon decays a matrix by lr * weight_decay (the unscaled lr) per step, as AdamW does; `momentum` is
    its Nesterov momentum. newton_schulz_dtype None iterates in bfloat16 where the device has it natively (as
    torch.optim.Muon always does) and in float32 where bfloat16 would be emulated (shared.muon.bf16_is_native).
    Returns one MuonWithAdamW, which train() and the checkpoints use as one optimizer.
    """
    check_finite("lr", lr, 0.0, " (Muon's peak learning rate)")
    adamw_lr = lr if adamw_lr is None else check_finite("adamw_lr", adamw_lr, 0.0, " (AdamW's peak learning rate)")
    check_finite("weight_decay", weight_decay, 0.0, " (decoupled weight decay of the matrices; 0: none)")
    betas = check_betas("betas", betas)
    if not 0.0 <= check_finite("momentum", momentum, 0.0, " (Muon's momentum, e.g. 0.95)") < 1.0:
        raise ValueError(f"momentum must be in [0, 1) (Muon's momentum, e.g. 0.95), got {momentum!r}")
    check_choice("adjust_lr_fn", adjust_lr_fn, ("match_rms_adamw", "original"))
    model = unwrap(model)
    blocks = getattr(model, "blocks", None)
    if not isinstance(blocks, nn.Module):
        raise TypeError(f"make_muon needs a model with its hidden layers in .blocks (as shared.gpt.GPT), "
                        f"got a {type(model).__name__}")
    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}  # a tied head too
    hidden = {id(p) for p in blocks.parameters() if p.ndim == 2 and id(p) not in embeddings}
    params = [p for p in model.parameters() if p.requires_grad]  # a tied weight comes once
    matrices = [p for p in params if id(p) in hidden]
    if not matrices:
        raise ValueError("make_muon found no 2-D weights in model.blocks for Muon")
    muon = Muon(matrices, lr=lr, weight_decay=weight_decay, momentum=momentum, adjust_lr_fn=adjust_lr_fn,
                newton_schulz_dtype=newton_schulz_dtype)
    others = [p for p in params if id(p) not in hidden]
    adamw = torch.optim.AdamW(_adamw_groups(model, others, weight_decay), lr=adamw_lr, betas=betas)
    return MuonWithAdamW(muon, adamw)


def train(
    model: nn.Module,
    optimizer: torch.optim.Optimizer | MuonWithAdamW,
    batch_fn: Callable[[int], Any],
    loss_fn: Callable[[nn.Module, Any], tuple[Tensor, int]],
    *,
    max_steps: int,
    schedule: Schedule | None = None,
    max_seconds: float | None = None,
    grad_clip: float | None = 1.0,
    eval_fn: Callable[[nn.Module], float] | None = None,
    eval_every: int = 0,
    log_every: int = 10,
    history: History | None = None,
    checkpoint_fn: Callable[[History], None] | None = None,
    checkpoint_every: int = 0,
    progress: bool = True,
    desc: str = "train",
    micro_batches: int = 1,
    precision: str | Precision = "fp32",
) -> History:
    """Train until `max_steps` (or `max_seconds` of training time); pass a saved `history` to resume.

    `loss_fn(model, batch)` returns (mean loss, number of tokens it averaged over: an int or a 0-d tensor).
    The loss sums are read back from the device only when logging. With `max_seconds` the schedule's
    progress fraction follows the clock, so a cosine decay ends when time runs out; a schedule factor that
    is not a finite number >= 0 raises ValueError naming the step. In fp32 and bf16 a NaN or inf loss, or a
    non-finite gradient norm, raises FloatingPointError naming the step, before the optimizer step touches
    the weights (one small read from the device per step; fp16's GradScaler reads one too, and skips such
    steps instead).
    `grad_clip` caps the gradient norm (None: measure it only). `micro_batches` splits each batch for
    gradient accumulation, each token weighing the same (see `backward_micro_batches`);
    `precision` ('fp32', 'bf16', 'fp16', 'auto': see `auto_precision`) runs the forward pass under autocast.
    Inside a torchrun process group (see shared.distributed) pass a DDP model, this rank's shard of each
    batch and the same other arguments on every rank: the logged loss covers all ranks, rank 0 alone shows
    the bar and calls checkpoint_fn, and a time budget stops every rank at the same step.
    Before each checkpoint and at the end, `history` records fp16's loss scale and every rank's random state,
    so that a run resumed from a checkpoint (shared.checkpoint.restore_training) continues exactly.
    """
    check_positive_int("max_steps", max_steps)
    check_optional_positive_number("max_seconds", max_seconds, " (None: no time budget)")
    check_grad_clip(grad_clip)
    check_positive_int("log_every", log_every)
    check_int("eval_every", eval_every, minimum=0, meaning=" (0: never)")
    check_int("checkpoint_every", checkpoint_every, minimum=0, meaning=" (0: never)")
    if checkpoint_every % log_every:  # a checkpoint must hold a history logged up to its step
        raise ValueError(f"log_every must divide checkpoint_every, got {log_every}, {checkpoint_every}")
    check_positive_int("micro_batches", micro_batches)
    check_instance("history", history, History, optional=True)
    history = History() if history is None else history
    for group in optimizer.param_groups:
        group.setdefault("base_lr", group["lr"])
    seconds = history.seconds[-1] if history.seconds else 0.0
    tokens = history.tokens[-1] if history.tokens else 0
    loss_sum = loss_tokens = norm_sum = 0  # summed on the device; read back only when logging (one sync)
    ranks = current_ranks()  # rank 0 of 1 outside a process group
    amp = precision if isinstance(precision, Precision) else Precision(precision, next(model.parameters()).device)
    if amp.scaler is not None and history.grad_scaler:  # resuming fp16: continue at the saved loss scale
        amp.scaler.load_state_dict(history.grad_scaler)
    bar = _open_bar(max_steps, history.next_step, desc, progress and ranks.is_main)
    step = logged_at = history.next_step
    while step < max_steps and (max_seconds is None or seconds < max_seconds):
        started = time.perf_counter()
        frac = step / max_steps if max_seconds is None else max(step / max_steps, seconds / max_seconds)
        factor = 1.0 if schedule is None else check_finite(
            f"schedule({step}, {frac:.4g})", schedule(step, frac), 0.0, f" (the learning-rate factor at step {step})")
        for group in optimizer.param_groups:
            group["lr"] = group["base_lr"] * factor
        model.train()
        optimizer.zero_grad(set_to_none=True)
        weighted, n = backward_micro_batches(model, loss_fn, batch_fn(step), micro_batches, amp)  # loss * n, n
        # clip (None: measure only) and step; fp16 unscales first and skips a non-finite step by itself, the
        # others raise on a non-finite loss or gradient norm before the weights change (one read per step)
        norm = amp.step(optimizer, grad_clip, loss=weighted, at_step=step)
        loss_sum, loss_tokens, norm_sum = loss_sum + weighted, loss_tokens + n, norm_sum + norm.detach()
        step += 1
        seconds += time.perf_counter() - started
        if max_seconds is not None and ranks.world_size > 1:
            seconds = all_reduce_max(seconds)  # every rank agrees on the clock, so all stop at the same step
        last = step == max_steps or (max_seconds is not None and seconds >= max_seconds)
        if step % log_every == 0 or last:
            n_steps, logged_at = step - logged_at, step
            loss_sum, loss_tokens = all_reduce_sum(loss_sum, loss_tokens)  # over all ranks (DDP)
            tokens += int(loss_tokens)
            history.step.append(step)
            history.loss.append(float(loss_sum) / int(loss_tokens) if int(loss_tokens) else math.nan)  # no tokens
            history.lr.append(optimizer.param_groups[0]["lr"])
            history.tokens.append(tokens)
            history.seconds.append(seconds)
            history.grad_norm.append(float(norm_sum) / max(n_steps, 1))
            loss_sum = loss_tokens = norm_sum = 0
            bar.set_postfix(_postfix(history))
        if eval_fn is not None and eval_every and (step % eval_every == 0 or last):
            history.val_step.append(step)
            history.val_loss.append(evaluate(model, eval_fn))
            bar.set_postfix(_postfix(history))
        history.next_step = step
        if checkpoint_every and step % checkpoint_every == 0:
            _record_resume_state(history, amp)  # on every rank: it gathers their RNG states
            if checkpoint_fn is not None and ranks.is_main:
                checkpoint_fn(history)
        bar.update(1)
    _close_bar(bar, step)
    _record_resume_state(history, amp)  # for a checkpoint saved after train() returns, even after sampling
    return history


def _record_resume_state(history: History, amp: Precision) -> None:
    """Store in `history` what resuming needs beyond weights and optimizer: the fp16 GradScaler's state and
    each rank's random state (one in a single process; in a process group a collective, so every rank calls
    this at the same steps). restore_training restores these, not the state at save time."""
    history.grad_scaler = None if amp.scaler is None else amp.scaler.state_dict()
    history.rng_per_rank = all_gather_object(rng_state())


def _postfix(history: History) -> dict[str, str]:
    """What the progress bar shows after its count: the latest logged loss, lr and validation loss."""
    shown = {}
    if history.loss:
        shown.update(loss=f"{history.loss[-1]:.4f}", lr=f"{history.lr[-1]:.2e}")
    if history.val_loss:
        shown["val"] = f"{history.val_loss[-1]:.4f}"
    return shown


def _open_bar(total: int, initial: int, desc: str, progress: bool):
    """A tqdm bar; in Jupyter a widget displayed with an id, so that its final state can be stored."""
    if progress and issubclass(tqdm, tqdm_notebook):
        from IPython.display import display

        bar = tqdm(total=total, initial=initial, desc=desc, leave=True, display=False)
        bar.handle = display(bar.container, display_id=True)
        return bar
    return tqdm(total=total, initial=initial, desc=desc, disable=not progress, leave=True)


def _close_bar(bar, step: int) -> None:
    """Close at the real count: a run stopped by its time budget ends as a finished bar, not a failed one."""
    if step and bar.total != step:
        bar.total = step
        if hasattr(bar, "container"):
            bar.container.children[1].max = step
        bar.refresh()
    bar.close()
    if getattr(bar, "handle", None) is not None:
        bar.handle.update(bar.container)  # the notebook keeps this last picture (its text shows the final count)


@torch.no_grad()
def evaluate(model: nn.Module, eval_fn: Callable[[nn.Module], float]) -> float:
    """Run `eval_fn(model)` in eval mode without gradients, then give the model back the mode it had."""
    with eval_mode(model):
        return float(eval_fn(model))
