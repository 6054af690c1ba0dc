"""Muon (Jordan et al. 2024): momentum, then each matrix's update orthogonalised by Newton-Schulz.

- `newton_schulz(G)`: notebook 10's by-hand iteration for any (..., m, n) batch of matrices, in a chosen dtype.
- `Muon`: torch.optim.Muon's algorithm (the same arguments, state and state_dict), with the Newton-Schulz dtype
  chosen by the hardware: bfloat16 where it is native, float32 where bfloat16 would be emulated.
- `bf16_is_native(device)` / `newton_schulz_dtype(device)`: that choice, to print or to test.

Why a course Muon: torch.optim.Muon always iterates in bfloat16. On a CPU without bfloat16 instructions (AVX2 only,
e.g. most AMD and many Intel laptops) a bfloat16 matmul is emulated, tens of times slower than float32, and a Muon
step then costs several AdamW steps. Where bfloat16 is native, this Muon takes the same steps as torch's
(tests/test_muon_optimizer.py).
"""

from __future__ import annotations

import torch
from torch import Tensor

MUON_COEFFICIENTS = (3.4445, -4.7750, 2.0315)  # torch.optim.Muon's quintic (a, b, c), from Jordan et al. 2024
NEWTON_SCHULZ_STEPS = 5  # torch.optim.Muon's default
EPS = 1e-7  # torch.optim.Muon's default: the smallest norm a matrix is divided by


def _cpu_has_native_bf16() -> bool:
    """oneDNN's own probe: True on CPUs with AVX512-BF16 or AMX; False on AVX2-only CPUs (and where it is absent)."""
    probe = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    return bool(probe()) if probe is not None else False


def bf16_is_native(device: str | torch.device = "cpu") -> bool:
    """Whether `device` multiplies bfloat16 matrices in hardware: CUDA capability >= 8.0 (Ampere and later; not a
    T4, whatever torch.cuda.is_bf16_supported() says by default), or a CPU with AVX512-BF16 or AMX. Other devices
    (MPS): False, untested."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_capability(device) >= (8, 0)
    if device.type == "cpu":
        return _cpu_has_native_bf16()
    return False


def newton_schulz_dtype(device: str | torch.device = "cpu") -> torch.dtype:
    """The dtype Muon iterates in on `device`: bfloat16 where it is native, float32 where it would be emulated."""
    return torch.bfloat16 if bf16_is_native(device) else torch.float32


def newton_schulz(G: Tensor, steps: int = NEWTON_SCHULZ_STEPS, coefficients=MUON_COEFFICIENTS, eps: float = EPS,
                  dtype: torch.dtype | None = None) -> Tensor:
    """G (..., m, n) -> (..., m, n) in `dtype` (None: G's): each matrix divided by its own Frobenius norm (at least
    eps), then `steps` times X <- a X + (b A + c A^2) X with A = X X^T (notebook 10, section 9). A tall matrix is
    worked on transposed, so that A is the smaller Gram matrix."""
    a, b, c = coefficients
    X = G if dtype is None else G.to(dtype)
    tall = G.shape[-2] > G.shape[-1]
    if tall:
        X = X.mT  # (..., n, m)
    batch, (m, n) = X.shape[:-2], X.shape[-2:]
    X = X.reshape(-1, m, n)  # (k, m, n): k matrices
    X = X / X.norm(dim=(-2, -1), keepdim=True).clamp(min=eps)  # every singular value is now <= 1
    for _ in range(steps):
        A = X @ X.mT  # (k, m, m)
        # X <- a X + (b A + c A @ A) @ X, each line one fused call (baddbmm: beta * input + alpha * m1 @ m2) that
        # rounds once, as torch.optim.Muon's addmm does: in bfloat16, separate products and sums would round 3x
        # as often
        B = torch.baddbmm(A, A, A, beta=b, alpha=c)  # (k, m, m)
        X = torch.baddbmm(X, B, X, beta=a)  # (k, m, n) = U p(S) V^T: the same U and V, every s moved by p
    X = X.reshape(*batch, m, n)
    return X.mT if tall else X


def adjusted_lr(lr: float, adjust_lr_fn: str | None, shape: torch.Size) -> float:
    """Muon's lr for a matrix of shape (A, B): "original" (or None) lr * sqrt(max(1, A / B)) (Jordan et al.);
    "match_rms_adamw" lr * 0.2 * sqrt(max(A, B)) (Liu et al. 2025), an update of AdamW's size."""
    A, B = shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        return lr * max(1.0, A / B) ** 0.5
    if adjust_lr_fn == "match_rms_adamw":
        return lr * 0.2 * max(A, B) ** 0.5
    raise ValueError(f"adjust_lr_fn must be 'original', 'match_rms_adamw' or None, got {adjust_lr_fn!r}")


class Muon(torch.optim.Muon):
    """torch.optim.Muon's step for 2-D parameters (A, B), with Newton-Schulz in `newton_schulz_dtype`.

    Per matrix W with gradient G, momentum buffer M, lr η, weight decay λ and momentum μ (as torch's code):
        M <- μ M + (1 - μ) G;  U = (1 - μ) G + μ M if nesterov else M;  O = newton_schulz(U)
        W <- (1 - η λ) W - adjusted_lr(η, adjust_lr_fn, (A, B)) O
    newton_schulz_dtype None (the default) picks per device, at each step: bfloat16 where bf16_is_native, else
    float32. The arguments, param_groups and state_dict are torch.optim.Muon's, so either loads the other's state.
    """

    def __init__(self, params, *args, newton_schulz_dtype: torch.dtype | None = None, **kwargs) -> None:
        super().__init__(params, *args, **kwargs)
        if newton_schulz_dtype not in (None, torch.bfloat16, torch.float32):
            raise ValueError(f"newton_schulz_dtype must be None (by the hardware), torch.bfloat16 or torch.float32, "
                             f"got {newton_schulz_dtype!r}")
        self.newton_schulz_dtype = newton_schulz_dtype  # not in param_groups: the state_dict stays torch's

    def dtype_for(self, device: str | torch.device) -> torch.dtype:
        """The dtype this optimizer iterates in for a matrix on `device`."""
        return self.newton_schulz_dtype or newton_schulz_dtype(device)

    @torch.no_grad()
    def step(self, closure=None):
        """One Muon step for every matrix with a gradient; returns the closure's loss (None without one)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, momentum = float(group["lr"]), group["momentum"]
            dtypes = {}  # device -> dtype, probed once per step
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse or torch.is_complex(p):
                    raise RuntimeError("Muon supports neither sparse gradients nor complex parameters")
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(p.grad, memory_format=torch.preserve_format)
                buf = state["momentum_buffer"]
                buf.lerp_(p.grad, 1 - momentum)  # M <- μ M + (1 - μ) G
                update = p.grad.lerp(buf, momentum) if group["nesterov"] else buf
                dtype = dtypes.setdefault(p.device, self.dtype_for(p.device))
                update = newton_schulz(update, group["ns_steps"], group["ns_coefficients"], group["eps"], dtype)
                p.mul_(1 - lr * group["weight_decay"])  # decoupled weight decay, by the unscaled lr
                p.add_(update, alpha=-adjusted_lr(lr, group["adjust_lr_fn"], p.shape))
        return loss
