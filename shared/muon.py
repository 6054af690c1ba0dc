"""Muon (Jordan et al. 2024): momentum, then each matrix's update orthogonalised by Newton-Schulz.

- `newton_schulz(G)`: notebook 10's by-hand iteration for any (..., m, n) batch of matrices, in a chosen dtype.
- `Muon`: torch.optim.Muon's algorithm (the same arguments, state and state_dict), with the Newton-Schulz dtype
  chosen by the hardware: bfloat16 where it is native, float32 where bfloat16 would be emulated.
- `bf16_is_native(device)` / `newton_schulz_dtype(device)`: that choice, to print or to test; on a CPU it rests on
  oneDNN's probe and `bf16_matmul_slowdown()`, a measured bfloat16/float32 matmul time ratio.

Why a course Muon: torch.optim.Muon always iterates in bfloat16. On a CPU without bfloat16 instructions (AVX2 only,
e.g. most AMD and many Intel laptops) a bfloat16 matmul is emulated, tens of times slower than float32, and a Muon
step then costs several AdamW steps. Where bfloat16 is native, this Muon takes the same steps as torch's
(tests/test_muon_optimizer.py).
"""

from __future__ import annotations

import functools
import math
import time

import torch
from torch import Tensor

from .validation import check_finite, check_float_tensor, check_int

MUON_COEFFICIENTS = (3.4445, -4.7750, 2.0315)  # torch.optim.Muon's quintic (a, b, c), from Jordan et al. 2024
NEWTON_SCHULZ_STEPS = 5  # torch.optim.Muon's default
EPS = 1e-7  # torch.optim.Muon's default: the smallest norm a matrix is divided by


NATIVE_BF16_MAX_SLOWDOWN = 1.5  # native: a bf16 matmul at most this much slower than fp32. Measured on one thread
# of a Xeon with AMX: 0.25; the same CPU capped by ONEDNN_MAX_CPU_ISA to AVX-512 without BF16: 5; to AVX2: 60-90


def _onednn_says_bf16() -> bool:
    """oneDNN's probe: True on any CPU with AVX-512 (with or without its BF16 extension) and where bfloat16 is
    emulated at that level; False on AVX2-only CPUs and where the probe is absent."""
    probe = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    return bool(probe()) if probe is not None else False


@functools.cache
def bf16_matmul_slowdown(n: int = 256, repeats: int = 5) -> float:
    """A CPU's (n, n) @ (n, n) time in bfloat16 divided by its time in float32 on one thread, the best of `repeats`
    each, measured once a process (milliseconds; a quarter of a second where bfloat16 is emulated): below 1 where
    bfloat16 is native, several times 1 where it is not."""
    generator = torch.Generator().manual_seed(0)
    a, b = torch.randn(n, n, generator=generator), torch.randn(n, n, generator=generator)
    pairs = {dtype: (a.to(dtype), b.to(dtype)) for dtype in (torch.float32, torch.bfloat16)}
    best = dict.fromkeys(pairs, math.inf)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one core: the instructions' speed, not how busy the other cores are
    try:
        for round in range(repeats + 1):
            for dtype, (x, y) in pairs.items():  # interleaved: a busy moment slows both alike
                start = time.perf_counter()
                x @ y
                if round > 0:  # round 0 warms up
                    best[dtype] = min(best[dtype], time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)
    return best[torch.bfloat16] / best[torch.float32]


def _cpu_has_native_bf16() -> bool:
    """oneDNN's probe first (False on AVX2-only CPUs), then a measured matmul: AVX-512 without the BF16 extension
    (e.g. Skylake-SP, Cascade Lake, Ice Lake) passes the probe but emulates bfloat16, ~5x slower than float32."""
    return _onednn_says_bf16() and bf16_matmul_slowdown() <= NATIVE_BF16_MAX_SLOWDOWN


def bf16_is_native(device: str | torch.device = "cpu") -> bool:
    """Whether `device` multiplies bfloat16 matrices in hardware: CUDA capability >= 8.0 (Ampere and later; not a
    T4, whatever torch.cuda.is_bf16_supported() says by default), or a CPU whose bfloat16 matmul oneDNN supports
    and runs at least about as fast as float32 (AVX512-BF16 or AMX). Other devices (MPS): False, untested."""
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
    check_float_tensor("G", G, min_dim=2)
    check_int("steps", steps, 0, " and below 100 (as torch.optim.Muon)")
    if steps >= 100:
        raise ValueError(f"steps must be an int >= 0 and below 100 (as torch.optim.Muon), got {steps!r}")
    if len(coefficients) != 3:
        raise ValueError(f"coefficients must be three numbers (a, b, c), got {coefficients!r}")
    a, b, c = (check_finite("coefficients", number) for number in coefficients)
    check_finite("eps", eps, 0.0)
    X = G if dtype is None else G.to(dtype)
    tall = G.shape[-2] > G.shape[-1]
    if tall:
        X = X.mT  # (..., n, m)
    batch, (m, n) = X.shape[:-2], X.shape[-2:]
    if X.ndim == 2:  # one matrix: torch.addmm, as torch.optim.Muon, so that bfloat16 rounds exactly as there
        product, X = torch.addmm, X
    else:  # (k, m, n): k matrices, torch.baddbmm (the same fused product, batched)
        product, X = torch.baddbmm, X.reshape(batch.numel(), m, n)
    X = X / X.norm(dim=(-2, -1), keepdim=True).clamp(min=eps)  # every singular value is now <= 1
    for _ in range(steps):
        A = X @ X.mT  # (k, m, m)
        # X <- a X + (b A + c A @ A) @ X, each line one fused call (beta * input + alpha * m1 @ m2) that rounds once:
        # in bfloat16, separate products and sums would round 3x as often
        B = product(A, A, A, beta=b, alpha=c)  # (k, m, m)
        X = product(X, B, X, beta=a)  # (k, m, n) = U p(S) V^T: the same U and V, every s moved by p
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
    Unlike torch's, step() raises ValueError where a group's adjust_lr_fn was set after construction to something
    other than "original", "match_rms_adamw" or None (torch then silently takes the unscaled lr), and where a
    parameter added by add_param_group is not 2-D.
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
        dtypes = {}  # device -> Newton-Schulz dtype, chosen once per device per step
        for group in self.param_groups:
            lr, momentum = float(group["lr"]), group["momentum"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.ndim != 2:  # torch checks at construction and in add_param_group; a list edited later is not
                    raise ValueError(f"Muon steps 2-D parameters only, got shape {tuple(p.shape)}")
                if p.grad.is_sparse or torch.is_complex(p):
                    raise RuntimeError("Muon supports neither sparse gradients nor complex parameters")
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(p.grad, memory_format=torch.preserve_format)
                buf = state["momentum_buffer"]
                buf.lerp_(p.grad, 1 - momentum)  # M <- μ M + (1 - μ) G
                update = p.grad.lerp(buf, momentum) if group["nesterov"] else buf
                if p.device not in dtypes:
                    dtypes[p.device] = self.dtype_for(p.device)
                dtype = dtypes[p.device]
                update = newton_schulz(update, group["ns_steps"], group["ns_coefficients"], group["eps"], dtype)
                p.mul_(1 - lr * group["weight_decay"])  # decoupled weight decay, by the unscaled lr
                p.add_(update, alpha=-adjusted_lr(lr, group["adjust_lr_fn"], p.shape))
        return loss
