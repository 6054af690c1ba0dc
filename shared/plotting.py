"""Plots the notebooks share: attention heatmaps, masks, positional tables, loss curves and the architecture map."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import torch
from torch import Tensor

from .architecture import plot_architecture  # noqa: F401  (the whole-model map lives in its own module)
from .validation import check_finite, check_positive_int


def _to_2d(x: Tensor, name: str):
    x = torch.as_tensor(x).detach().float().cpu()
    while x.dim() > 2 and x.size(0) == 1:
        x = x[0]
    if x.dim() != 2 or 0 in x.shape:
        raise ValueError(f"{name} must be 2-D (T_q, T_k) after dropping size-1 dims, with T_q, T_k >= 1, "
                         f"got {tuple(x.shape)}")
    return x.numpy()


def _check_labels(labels, n: int, name: str) -> None:
    if labels is not None and len(labels) != n:
        raise ValueError(f"{name} must have one label per row/column ({n}), got {len(labels)}")


def plot_attention(weights, x_labels: Sequence[str] | None = None, y_labels: Sequence[str] | None = None,
                   ax=None, title: str = "", colorbar: bool = True, vmin: float = 0.0, vmax: float | None = 1.0):
    """One heatmap of attention weights (T_q, T_k): rows are queries, columns are keys.

    The colour scale is fixed to [vmin, vmax] = [0, 1] so that heatmaps drawn side by side compare;
    vmax=None scales to this map's own maximum instead.
    """
    w = _to_2d(weights, "weights")
    _check_labels(x_labels, w.shape[1], "x_labels")
    _check_labels(y_labels, w.shape[0], "y_labels")
    check_finite("vmin", vmin, meaning=" (the weight drawn darkest; 0 for attention)")
    top = max(float(w.max()), vmin + 1e-9) if vmax is None else check_finite("vmax", vmax, meaning=" or None")
    if not top > vmin:
        raise ValueError(f"vmax must be greater than vmin ({vmin}), got {vmax!r}")
    if ax is None:
        _, ax = plt.subplots(figsize=(0.45 * w.shape[1] + 2, 0.45 * w.shape[0] + 1.5))
    image = ax.imshow(w, cmap="viridis", vmin=vmin, vmax=top, aspect="auto")
    if x_labels is not None:
        long_labels = len(x_labels) > 12 or sum(len(str(label)) for label in x_labels) > 3 * len(x_labels)
        ax.set_xticks(range(len(x_labels)), list(x_labels), rotation=90 if long_labels else 0)
    if y_labels is not None:
        ax.set_yticks(range(len(y_labels)), list(y_labels))
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query")
    ax.set_title(title)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return ax


def plot_attention_grid(weights, x_labels=None, y_labels=None, titles: Sequence[str] | None = None,
                        ncols: int = 4, suptitle: str = "", cell: float = 3.0, colorbar: bool = True):
    """A grid of heatmaps from (N, T_q, T_k) weights, e.g. one per head, on one 0-1 scale; returns the figure.

    The heatmap axes come first in `fig.axes`; with colorbar=True one shared colorbar is the last axes.
    """
    w = torch.as_tensor(weights).detach().float().cpu()
    if w.dim() != 3 or 0 in w.shape:
        raise ValueError(f"weights must be (N, T_q, T_k) with N, T_q, T_k >= 1, e.g. (heads, T_q, T_k); "
                         f"got {tuple(w.shape)}")
    n = w.size(0)
    if titles is not None and len(titles) != n:
        raise ValueError(f"titles must have one entry per map ({n}), got {len(titles)}")
    check_positive_int("ncols", ncols)
    ncols = min(ncols, n)
    nrows = -(-n // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(cell * ncols, cell * nrows), squeeze=False)
    for i, ax in enumerate(axes.flat):
        if i >= n:
            ax.axis("off")
            continue
        plot_attention(w[i], x_labels, y_labels, ax=ax, title=titles[i] if titles else f"head {i}", colorbar=False)
        if i % ncols:
            ax.set_ylabel("")
    if suptitle:
        fig.suptitle(suptitle)
    fig.tight_layout()
    if colorbar:
        shared_colorbar(axes.flat[:n])
    return fig


def shared_colorbar(axes, label: str = "attention weight"):
    """One colorbar for several heatmaps drawn on the same scale (call it after `fig.tight_layout()`)."""
    axes = list(axes)
    images = [image for ax in axes for image in ax.images]
    if not images:
        raise ValueError("axes must hold at least one heatmap (drawn with imshow), got none")
    limits = {tuple(image.get_clim()) for image in images}
    if len(limits) != 1:
        raise ValueError(f"axes must share one colour scale to share a colorbar, got scales {sorted(limits)}")
    bar = axes[0].figure.colorbar(images[0], ax=axes, fraction=0.046 if len(axes) == 1 else 0.03, pad=0.03)
    bar.set_label(label)
    return bar


def plot_mask(mask, x_labels=None, y_labels=None, ax=None, title: str = "mask"):
    """A bool mask (T_q, T_k) as a picture: dark = may attend (True), light = blocked (False)."""
    m = _to_2d(torch.as_tensor(mask).to(torch.float32), "mask")
    _check_labels(x_labels, m.shape[1], "x_labels")
    _check_labels(y_labels, m.shape[0], "y_labels")
    if ax is None:
        _, ax = plt.subplots(figsize=(0.4 * m.shape[1] + 1.5, 0.4 * m.shape[0] + 1.2))
    ax.imshow(m, cmap="Greys", vmin=0, vmax=1.25)
    for spot in ("x", "y"):
        labels = x_labels if spot == "x" else y_labels
        n = m.shape[1] if spot == "x" else m.shape[0]
        getattr(ax, f"set_{spot}ticks")(range(n), list(labels) if labels is not None else range(n))
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    ax.set_title(title)
    return ax


def plot_positional_encoding(table, ax=None, title: str = "sinusoidal positional encoding"):
    """Heatmap of a (max_len, d_model) positional table: position on y, dimension (column) on x."""
    t = _to_2d(table, "table")
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4))
    image = ax.imshow(t, cmap="RdBu", vmin=-1, vmax=1, aspect="auto", interpolation="nearest")
    ax.set_xlabel("dimension (column)")
    ax.set_ylabel("position")
    ax.set_title(title)
    ax.figure.colorbar(image, ax=ax)
    return ax


def plot_loss(history, ax=None, baseline: float | None = None, baseline_label: str = "baseline",
              title: str = "loss", label: str = ""):
    """Training (and validation, when recorded) loss against step from a `shared.history.History`."""
    if not history.step or len(history.step) != len(history.loss):
        raise ValueError(f"history must hold as many steps as losses (>= 1), got {len(history.step)} and "
                         f"{len(history.loss)}")
    if len(history.val_step) != len(history.val_loss):
        raise ValueError(f"history.val_step and history.val_loss differ in length: {len(history.val_step)} and "
                         f"{len(history.val_loss)}")
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    prefix = f"{label} " if label else ""
    ax.plot(history.step, history.loss, label=f"{prefix}train")
    if history.val_loss:
        ax.plot(history.val_step, history.val_loss, "o-", label=f"{prefix}validation")
    if baseline is not None:
        ax.axhline(baseline, color="grey", linestyle="--", label=baseline_label)
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats/token)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    return ax


KV_CACHED, KV_NEW, KV_RECOMPUTED = "#9ecae1", "#e6550d", "#bdbdbd"  # read from the cache, computed now, again


def plot_kv_cache(prompt_len: int, steps: int, n_heads: int, d_k: int, batch: int = 1,
                  block_size: int | None = None, cell: float = 0.36):
    """Decoding with and without a KV cache, step by step, in one block; returns the figure (two panels).

    Row 0 is the prompt (`prompt_len` positions, computed once), rows 1..steps add one character each. Left, with
    the cache: the positions whose keys and values are read from the cache, and the one new position computed and
    appended this step, labelled with the cache's shape (batch, n_heads, t, d_k) after the step. Right, without it:
    every position is computed again, Q, K and V (batch, n_heads, t, d_k) each, of which only the newest is new.
    One square per position and step (`ax.patches`); `block_size`, if given, caps prompt_len + steps.
    """
    for name, value in (("prompt_len", prompt_len), ("steps", steps), ("n_heads", n_heads), ("d_k", d_k),
                        ("batch", batch)):
        check_positive_int(name, value)
    total = prompt_len + steps
    if block_size is not None and total > check_positive_int("block_size", block_size):
        raise ValueError(f"block_size ({block_size}) must hold prompt_len + steps ({prompt_len} + {steps} = {total}): "
                         "positions stop at block_size")
    from matplotlib.patches import Patch, Rectangle

    width = min(16.0, 2 * (cell * total + 2.6) + 0.8)
    fig, axes = plt.subplots(1, 2, figsize=(width, cell * (steps + 1) + 2.0), sharey=True)
    for ax, cached in zip(axes, (True, False)):
        for row in range(steps + 1):
            t = prompt_len + row  # positions in the context after this step
            for position in range(t):
                new = row == 0 or position == t - 1  # the prompt's pass computes all its positions once
                color = KV_NEW if new else (KV_CACHED if cached else KV_RECOMPUTED)
                ax.add_patch(Rectangle((position - 0.45, row - 0.45), 0.9, 0.9, facecolor=color, edgecolor="white"))
            shape = f"({batch}, {n_heads}, {t}, {d_k})"
            label = f"cache K, V {shape}" if cached else f"Q, K, V {shape}"
            ax.annotate(label, (1, row), xycoords=("axes fraction", "data"), xytext=(6, 0),
                        textcoords="offset points", va="center", fontsize=9, family="monospace")
        ax.axvline(prompt_len - 0.5, color="#555555", lw=1, ls=":")
        ax.set_xlim(-0.6, total - 0.4)
        ax.set_ylim(steps + 0.6, -0.6)  # the prompt on top, later steps below
        ax.set_xticks(range(total))
        ax.set_xlabel(f"position in the context (the prompt: 0..{prompt_len - 1})")
        ax.set_aspect("equal")
        ax.tick_params(axis="y", length=0)
        for side in ("top", "right", "left"):
            ax.spines[side].set_visible(False)
        title = (f"with the KV cache: q ({batch}, {n_heads}, 1, {d_k}), scores ({batch}, {n_heads}, 1, t)" if cached
                 else f"without a cache: scores ({batch}, {n_heads}, t, t)")
        ax.set_title(title, fontsize=11)
    axes[0].set_yticks(range(steps + 1), ["prompt"] + [f"step {s}" for s in range(1, steps + 1)])
    axes[0].set_ylabel("decoding step")
    fig.legend(handles=[Patch(facecolor=KV_NEW, label="computed this step (new keys and values)"),
                        Patch(facecolor=KV_CACHED, label="read from the cache"),
                        Patch(facecolor=KV_RECOMPUTED, label="computed again, the same values as before")],
               loc="lower center", ncols=3, frameon=False, fontsize=10)
    fig.suptitle(f"one block, {n_heads} heads of d_k = {d_k}: each row adds one character", fontsize=12)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig


def plot_tokens(rows: Sequence[tuple[str, Sequence[str]]], width: int = 64, ax=None, title: str = ""):
    """Draw texts cut into tokens, one box per token in alternating colours: rows [(label, [piece, ...])].

    A piece is the text a token completes (an empty piece: a token that ends inside a character, drawn as a narrow
    grey box). Spaces show as '·' and line breaks as '↵'; wide (e.g. Chinese) characters take two columns; each row
    wraps at `width` columns.
    """
    import unicodedata

    check_positive_int("width", width)
    colours = ["#fde2a6", "#b9e0f5", "#d5f0c0", "#f7c9d9", "#e0d4f5", "#cdeee9"]
    layout = []  # (row, line, column, columns, piece, colour)
    line = 0
    for r, (_, pieces) in enumerate(rows):
        column = 0
        for k, piece in enumerate(pieces):
            shown = piece.replace(" ", "·").replace("\n", "↵")
            cols = sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in shown) or 0.6
            if column + cols > width and column > 0:
                line, column = line + 1, 0
            layout.append((r, line, column, cols, shown, colours[k % len(colours)] if shown else "#8c8c8c"))
            column += cols
        line += 2  # a blank line between rows
    if ax is None:
        _, ax = plt.subplots(figsize=(width * 0.16, 0.36 * line + 0.4))
    starts = {}
    for r, y, x, cols, shown, colour in layout:
        starts.setdefault(r, y)
        ax.add_patch(plt.Rectangle((x, -y - 0.85), cols, 0.8, facecolor=colour, edgecolor="white", linewidth=0.8))
        ax.text(x + cols / 2, -y - 0.45, shown, ha="center", va="center", fontsize=9,
                fontfamily=["DejaVu Sans Mono", "Noto Sans CJK SC", "Noto Sans CJK JP", "DejaVu Sans"])
    for r, (label, pieces) in enumerate(rows):
        ax.text(-1, -starts.get(r, 0) - 0.45, f"{label}\n{len(pieces)} tokens", ha="right", va="center", fontsize=9)
    ax.set_xlim(-0.5, width + 0.5)
    ax.set_ylim(-line + 1, 0.3)
    ax.axis("off")
    if title:
        ax.set_title(title, fontsize=10)
    return ax
