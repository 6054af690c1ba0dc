"""Exercise checkers for notebook 07 (training and debugging): Noam rate, global-norm clipping, label smoothing.

Import them from `shared.exercises`; see `shared.exercises.feedback` for how a checker reports.
"""

from __future__ import annotations

import math
from collections import OrderedDict

import torch
from torch import Tensor, nn

from ..training import lm_loss, train, warmup_cosine
from .feedback import Checker, exercise, random_tensor
from .modules import explained


def reference_noam_lr(step: int, d_model: int, warmup: int) -> float:
    """The paper's rate at step >= 1: d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)."""
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


@exercise("Noam learning rate")
def check_noam_lr(c: Checker) -> None:
    """fn(step, d_model, warmup) -> float."""
    for step, d_model, warmup in ((1, 512, 4000), (4000, 512, 4000), (100, 512, 4000), (20000, 512, 4000),
                                  (50, 64, 10), (10, 64, 10)):
        case = f"step={step}, d_model={d_model}, warmup={warmup}"
        got = c.call(case, step, d_model, warmup)
        if isinstance(got, torch.Tensor) and got.numel() == 1:
            got = got.item()
        if not isinstance(got, (int, float)):
            c.fail(case, f"expected a float, got {type(got).__name__}.", "return a Python number.")
        want = reference_noam_lr(step, d_model, warmup)
        if not math.isclose(got, want, rel_tol=1e-6):
            wrong = {
                "max": (d_model**-0.5 * max(step**-0.5, step * warmup**-1.5),
                        "use min(...): the warm-up line and the 1/sqrt(step) decay cross at step = warmup."),
                "scale": (min(step**-0.5, step * warmup**-1.5), "multiply by d_model ** -0.5."),
                "zero-based": (d_model**-0.5 * min((step + 1) ** -0.5, (step + 1) * warmup**-1.5),
                               "step counts from 1 here: use step itself, not step + 1."),
                "warmup power": (d_model**-0.5 * min(step**-0.5, step * warmup**-0.5),
                                 "the warm-up term is step * warmup ** -1.5 (so both terms meet at step = warmup)."),
            }
            hint = next((h for value, h in wrong.values() if math.isclose(got, value, rel_tol=1e-6)), "")
            c.fail(case, f"got {got:.6g}, expected {want:.6g}.", hint)
        c.passed()


@exercise("clipping by the global norm")
def check_clip_global_norm(c: Checker) -> None:
    """fn(grads: list of tensors, max_norm) -> (clipped list, total_norm float); inputs unchanged."""
    cases = {
        "two tensors, norm above max_norm": ([random_tensor(3, 4, seed=1) * 5, random_tensor(5, seed=2) * 5], 1.0),
        "norm below max_norm: unchanged": ([random_tensor(2, 2, seed=3) * 0.01, random_tensor(3, seed=4) * 0.01], 1.0),
        "one big and one small tensor": ([torch.tensor([30.0, 40.0]), torch.tensor([0.0, 1e-3])], 5.0),
    }
    for case, (grads, max_norm) in cases.items():
        originals = [g.clone() for g in grads]
        result = c.unpack(c.call(case, [g for g in grads], max_norm), case, ("clipped", "total_norm"))
        clipped, total = result
        norm = torch.cat([g.flatten() for g in originals]).norm()
        scale = min(1.0, max_norm / float(norm))
        if isinstance(total, torch.Tensor):
            total = total.item()
        if not isinstance(total, (int, float)) or not math.isclose(total, float(norm), rel_tol=1e-5):
            per = [float(g.norm()) for g in originals]
            hint = ("the global norm is sqrt of the sum of all squared entries, not the sum of the per-tensor "
                    "norms." if isinstance(total, (int, float)) and math.isclose(total, sum(per), rel_tol=1e-5)
                    else "total_norm = torch.cat([g.flatten() for g in grads]).norm() (before clipping).")
            c.fail(case, f"total_norm is {total!r}, expected {float(norm):.6g}.", hint)
        if any(not torch.equal(g, o) for g, o in zip(grads, originals)):
            c.fail(case, "your function changed the input tensors.", "build new tensors: g * scale, not g.mul_().")
        if not isinstance(clipped, (list, tuple)) or len(clipped) != len(originals):
            c.fail(case, "clipped must be a list with one tensor per gradient.")
        for i, (got, o) in enumerate(zip(clipped, originals)):
            per_tensor = o * min(1.0, max_norm / float(o.norm())) if float(o.norm()) > 0 else o
            c.close(got, o * scale, case, f"clipped[{i}]",
                    variants=[(per_tensor, "clip all gradients by one factor from the global norm, not each "
                               "tensor by its own norm."),
                              (o * max_norm / float(norm), "leave the gradients unchanged when the norm is already "
                               "below max_norm (scale = min(1, max_norm / total_norm)).")])
        c.passed()


@exercise("label-smoothed targets")
def check_smoothed_targets(c: Checker) -> None:
    """fn(targets (N,), vocab_size, eps) -> (N, vocab_size) target distribution."""
    for targets, V, eps in ((torch.tensor([0, 2, 1]), 4, 0.1), (torch.tensor([5]), 13, 0.2),
                            (torch.tensor([3, 3]), 5, 0.0)):
        case = f"targets={targets.tolist()}, vocab_size={V}, eps={eps}"
        want = torch.full((len(targets), V), eps / V)
        want[torch.arange(len(targets)), targets] += 1 - eps
        other = torch.full((len(targets), V), eps / (V - 1))
        other[torch.arange(len(targets)), targets] = 1 - eps
        no_share = torch.full((len(targets), V), eps / V)
        no_share[torch.arange(len(targets)), targets] = 1 - eps
        c.close(c.call(case, targets.clone(), V, eps), want, case, "targets", "(N, vocab_size)",
                variants=[(other, "this spreads eps over the V - 1 other classes; F.cross_entropy spreads eps / V "
                           "over all V classes, the target included (it gets 1 - eps + eps / V)."),
                          (no_share, "the target class also gets its share eps / V: 1 - eps + eps / V, so each row "
                           "sums to 1.")],
                shape_hints={(V, len(targets)): "rows are examples, columns classes: (N, vocab_size)."})
        c.passed()


# ---------------------------------------------------------------- one step of the training loop

_STEPS, _VOCAB = 5, 11


def _setup(seed: int = 0):
    """A tiny language model with dropout (in eval mode, as after an evaluation), SGD over two parameter groups."""
    torch.manual_seed(seed)
    model = nn.Sequential(OrderedDict(embed=nn.Embedding(_VOCAB, 16), drop=nn.Dropout(0.3), head=nn.Linear(16, _VOCAB)))
    groups = [{"params": [model.embed.weight, model.head.weight]}, {"params": [model.head.bias]}]
    return model, torch.optim.SGD(groups, lr=0.5)


def _batch(step: int):
    torch.manual_seed(1000 + step)  # this step's dropout masks: an extra forward pass (to log) changes no later step
    tokens = torch.randint(0, _VOCAB, (4, 9), generator=torch.Generator().manual_seed(100 + step))
    return tokens[:, :-1], tokens[:, 1:]


def _loss_fn(model, batch):
    inputs, targets = batch
    return lm_loss(model(inputs), targets)


def _reference_step(model, optimizer, batch, loss_fn, step, max_steps, schedule, base_lr, grad_clip, mistake=""):
    """One step of shared.training.train, written out, with switches for the usual mistakes."""
    factor = schedule(step + (mistake == "step + 1"), (step + (mistake == "step + 1")) / max_steps)
    groups = optimizer.param_groups[:1] if mistake == "one group" else optimizer.param_groups
    if mistake not in ("no lr", "lr after"):
        for group in groups:
            group["lr"] = group["lr"] * factor if mistake == "compound" else base_lr * factor
    if mistake != "eval":
        model.train()
    if mistake not in ("no zero_grad", "zero after"):
        optimizer.zero_grad()
    loss, _ = loss_fn(model, batch)
    loss.backward(retain_graph=mistake == "twice")
    if mistake == "twice":
        loss.backward()
    if mistake == "zero after":
        optimizer.zero_grad()
    if mistake not in ("no clip", "clip after"):
        nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    if mistake == "clip after":
        nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    if mistake == "lr after":
        for group in optimizer.param_groups:
            group["lr"] = base_lr * factor
    return loss.item()


_MISTAKES = {
    "no zero_grad": "the gradients accumulate over steps: call optimizer.zero_grad() before backward().",
    "zero after": "zero_grad() after backward() erases the gradients just computed: zero them before backward().",
    "no clip": "clip the gradients: torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip) after backward().",
    "clip after": "clipping after optimizer.step() is too late: the step already used the unclipped gradients.",
    "step + 1": "steps count from 0: the factor is schedule(step, step / max_steps), not schedule(step + 1, ...).",
    "lr after": "set the learning rate before optimizer.step(): this step ran with the previous step's rate.",
    "no lr": "set the rate of every group: group[\"lr\"] = base_lr * schedule(step, step / max_steps).",
    "compound": "group[\"lr\"] *= factor multiplies the factors of all steps: set base_lr * factor instead.",
    "one group": "set the rate of every group in optimizer.param_groups, not just the first.",
    "eval": "call model.train() at the start of the step: the model may come from an evaluation, in eval mode, "
    "and then dropout is off.",
    "twice": "call loss.backward() once per step: twice doubles the gradients.",
}
_ERRORS = {"backward through the graph a second time": "call loss.backward() once per step.",
           "'tuple' object has no attribute": "loss_fn(model, batch) returns (loss, n_tokens): unpack it.",
           "'base_lr'": "use the argument: group[\"lr\"] = base_lr * schedule(step, step / max_steps).",
           "argument: 'frac'": "a schedule takes (step, fraction of the run done): schedule(step, step / max_steps).",
           "positional argument": "the arguments are (model, optimizer, batch, loss_fn, step, max_steps, schedule, "
           "base_lr, grad_clip)."}


def _run(step_fn, grad_clip: float, mistake: str = "") -> tuple[list, nn.Module]:
    """_STEPS steps of `step_fn` from the seeded setup -> (what it returned at each step, the model)."""
    model, optimizer = _setup()
    torch.manual_seed(1)  # the same dropout masks in every run
    losses, schedule = [], warmup_cosine(2)
    for step in range(_STEPS):
        model.eval()  # as after an evaluation: the step must switch dropout back on
        args = (model, optimizer, _batch(step), _loss_fn, step, _STEPS, schedule, 0.5, grad_clip)
        losses.append(step_fn(*args, mistake=mistake) if mistake else step_fn(*args))
    return losses, model


def _flat(model: nn.Module, grads: bool = False) -> Tensor:
    """All weights (and, with grads, the last step's gradients) in one vector."""
    tensors = [*model.parameters()]
    tensors += [torch.zeros_like(p) if p.grad is None else p.grad for p in model.parameters()] if grads else []
    return torch.cat([t.detach().flatten() for t in tensors]).double()


def _diagnose(mine: nn.Module, grad_clip: float) -> str:
    """The hint of the mistake whose run ends with your weights (and gradients, where they tell mistakes apart)."""
    runs = {m: _run(_reference_step, grad_clip, m)[1] for m in _MISTAKES}
    for grads in (True, False):
        for mistake, model in runs.items():
            if torch.allclose(_flat(mine, grads), _flat(model, grads), rtol=1e-5, atol=1e-7):
                return _MISTAKES[mistake]
    return "follow train()'s order: set the rate, train(), zero_grad(), loss_fn, backward(), clip, step()."


@exercise("one training step")
def check_training_step(c: Checker) -> None:
    """fn(model, optimizer, batch, loss_fn, step, max_steps, schedule, base_lr, grad_clip) -> the loss (float)."""
    state = torch.random.get_rng_state()
    try:
        for grad_clip in (0.05, 1e6):  # every step clipped; no step clipped
            _check_steps(c, grad_clip)
    finally:
        torch.random.set_rng_state(state)


def _check_steps(c: Checker, grad_clip: float) -> None:
    case = f"{_STEPS} steps against train(), grad_clip={grad_clip:g}"
    model, optimizer = _setup()
    torch.manual_seed(1)
    history = train(model, optimizer, _batch, _loss_fn, max_steps=_STEPS, schedule=warmup_cosine(2),
                    grad_clip=grad_clip, log_every=1, progress=False)
    losses, mine = c.run(case, _run, explained(c, c.fn, _ERRORS), grad_clip)
    if not torch.allclose(_flat(mine), _flat(model), rtol=1e-5, atol=1e-7):  # zero_grad() at the end is fine too
        hint = _diagnose(mine, grad_clip)
        for (name, p), q in zip(model.named_parameters(), mine.parameters()):
            if not torch.allclose(q, p, rtol=1e-5, atol=1e-7):
                c.fail(case, f"after {_STEPS} steps the weights of {name} differ from train()'s (largest difference "
                       f"{float((q - p).detach().abs().max()):.3g}).", hint)
    for step, (loss, want) in enumerate(zip(losses, history.loss)):
        if isinstance(loss, Tensor) and loss.numel() == 1:
            loss = loss.item()
        if not isinstance(loss, (int, float)) or not math.isclose(loss, want, rel_tol=1e-5):
            c.fail(case, f"at step {step} your function returned {loss!r}, expected the loss {want:.6g}.",
                   "return the step's loss as a float: `return loss.item()`.")
    c.passed()
