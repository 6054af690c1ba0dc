"""Explorers of notebooks 01 and 04: softmax with and without 1/sqrt(d_k), and the sinusoidal table."""

from __future__ import annotations

import math

import ipywidgets as widgets
import torch
from matplotlib.figure import Figure

from ..plotting import plot_positional_encoding
from ..positions import sinusoidal_table
from .base import Explorer, bad_int, bad_positive, slider


def softmax_scaling_figure(d_k: int = 64, temperature: float = 1.0, n_keys: int = 16, seed: int = 0):
    """Attention of one random query over `n_keys` random keys (entries ~ N(0, 1)), with and without 1/√d_k.

    Returns a Figure with two bar charts, or a message string for bad values.
    """
    problem = (bad_int("d_k", d_k, 1, 4096, "the size of queries and keys") or bad_int("n_keys", n_keys, 2, 64)
               or bad_positive("temperature", temperature, "the softmax divides the scores by it"))
    if problem:
        return problem
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(d_k, generator=generator)  # (d_k,)
    keys = torch.randn(n_keys, d_k, generator=generator)  # (n_keys, d_k)
    scores = keys @ q  # (n_keys,)
    fig = Figure(figsize=(8, 3))
    axes = fig.subplots(1, 2, sharey=True)
    for ax, scale, name in ((axes[0], 1.0, "without scaling: softmax(q·k)"),
                            (axes[1], math.sqrt(d_k), "scaled: softmax(q·k / √d_k)")):
        weights = (scores / scale / temperature).softmax(-1)  # (n_keys,)
        ax.bar(range(n_keys), weights.numpy(), color="tab:blue" if scale == 1.0 else "tab:green")
        ax.set_ylim(0, 1)
        ax.set_xticks(range(n_keys))
        ax.set_xlabel("key")
        ax.set_title(f"{name}\nlargest weight {weights.max():.2f}", fontsize=10)
    axes[0].set_ylabel("attention weight")
    fig.suptitle(f"d_k = {d_k}, temperature = {temperature:g}: scores have std ≈ {scores.std():.1f} unscaled, "
                 f"{scores.std() / math.sqrt(d_k):.1f} scaled", fontsize=10)
    fig.tight_layout()
    return fig


def softmax_scaling_explorer(d_k: int = 64, temperature: float = 1.0, n_keys: int = 16) -> Explorer:
    """Sliders for d_k (powers of two), temperature and number of keys over `softmax_scaling_figure`.

    16 keys by default: the same row length as notebook 01's table of averaged weights.
    """
    controls = {"d_k": slider(widgets.SelectionSlider, d_k, "d_k", options=[2**i for i in range(11)]),
                "temperature": slider(widgets.FloatLogSlider, temperature, "temperature", base=10, min=-1, max=1,
                                       step=0.05),
                "n_keys": slider(widgets.IntSlider, n_keys, "keys", min=2, max=16)}
    return Explorer(softmax_scaling_figure, controls, "softmax scaling explorer")


# ---------------------------------------------------------------- 04: sinusoidal positional encoding


def positional_encoding_figure(d_model: int = 64, n_positions: int = 100, pair: int = 0):
    """The sinusoidal table (n_positions, d_model) as a heatmap, and dimensions 2i, 2i+1 (i = `pair`) as curves."""
    problem = bad_int("d_model", d_model, 2, 2048) or bad_int("n_positions", n_positions, 1, 5000)
    if problem or d_model % 2:
        return problem or f"d_model must be even (sin/cos pairs), got {d_model}."
    problem = bad_int("pair", pair, 0, d_model // 2 - 1, "the pair of dimensions 2i, 2i+1 to draw")
    if problem:
        return problem
    table = sinusoidal_table(n_positions, d_model)  # (n_positions, d_model)
    fig = Figure(figsize=(10, 3.5))
    left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.2, 1]})
    plot_positional_encoding(table, ax=left, title=f"table ({n_positions} positions × d_model={d_model})")
    for column in (2 * pair, 2 * pair + 1):
        left.axvline(column, color="black", lw=0.8, ls=":")
    positions = torch.arange(n_positions)
    right.plot(positions, table[:, 2 * pair], label=f"dim {2 * pair} (sin)")
    right.plot(positions, table[:, 2 * pair + 1], label=f"dim {2 * pair + 1} (cos)")
    wavelength = 2 * math.pi * 10000 ** (2 * pair / d_model)
    right.set_title(f"pair i={pair}: wavelength 2π·10000^(2i/d_model) ≈ {wavelength:,.1f} positions", fontsize=10)
    right.set_xlabel("position")
    right.set_ylim(-1.1, 1.1)
    right.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig


def positional_encoding_explorer(d_model: int = 64, n_positions: int = 100, pair: int = 0) -> Explorer:
    """Sliders for d_model, number of positions and the dimension pair over `positional_encoding_figure`."""
    pair_slider = slider(widgets.IntSlider, pair, "pair i", min=0, max=d_model // 2 - 1)
    d_model_slider = slider(widgets.SelectionSlider, d_model, "d_model", options=[2**i for i in range(2, 10)])

    def limit_pair(change):  # registered before the explorer's redraw, so the pair is valid when it draws
        pair_slider.max = change["new"] // 2 - 1

    d_model_slider.observe(limit_pair, names="value")
    controls = {"d_model": d_model_slider,
                "n_positions": slider(widgets.IntSlider, n_positions, "positions", min=10, max=500, step=10),
                "pair": pair_slider}
    return Explorer(positional_encoding_figure, controls, "positional encoding explorer")
