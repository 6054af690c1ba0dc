"""Exercise checkers for notebook 07 (training and debugging): Noam rate, global-norm clipping, label smoothing.

Import them from `shared.exercises`; see `shared.exercises.feedback` for how a checker reports.
"""

from __future__ import annotations

import math

import torch

from .feedback import Checker, exercise, random_tensor


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
