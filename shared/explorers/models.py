"""Explorers for trained models (notebooks 06 and 08): attention maps per layer and head, and a sampling playground.

Both take plain callables, so they do not depend on one model class: an `example_fn(i)` that returns the
attention maps of example i (see `attention_example`), and a `generate_text(prompt, ...)` that returns text.
Import them from `shared.explorers`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import ipywidgets as widgets
import torch
from matplotlib.figure import Figure

from ..plotting import plot_attention
from .base import Explorer, bad_int, bad_positive, slider


def attention_example(maps: dict, labels: dict | None = None, title: str = "") -> dict:
    """Package one example: maps {kind: (L, H, T_q, T_k)}, labels {kind: (query_labels, key_labels)}."""
    if not isinstance(maps, dict) or not maps:
        raise TypeError(f"maps must be a non-empty dict {{kind: (L, H, T_q, T_k) tensor}}, got {type(maps).__name__}")
    checked = {}
    for kind, m in maps.items():
        m = torch.as_tensor(m).detach().float().cpu()
        if m.dim() != 4:
            raise ValueError(f"maps[{kind!r}] must have shape (L, H, T_q, T_k), got {tuple(m.shape)}")
        checked[kind] = m
    return {"maps": checked, "labels": dict(labels or {}), "title": title}


def attention_figure(example: dict, kind: str | None = None, layer: int = 0, head: int | str = "all"):
    """Heatmap(s) of one example's attention: one head, or every head of the layer (head="all").

    `example` is a dict from `attention_example`. Returns a Figure, or a message string for bad values.
    """

    if not isinstance(example, dict) or "maps" not in example:
        return "example must be a dict made by attention_example(maps, labels)."
    maps = example["maps"]
    kind = next(iter(maps)) if kind is None else kind
    if kind not in maps:
        return f"kind must be one of {sorted(maps)}, got {kind!r}."
    L, H, T_q, T_k = maps[kind].shape
    problem = bad_int("layer", layer, 0, L - 1, f"this model has {L} layers")
    if head != "all":
        problem = problem or bad_int("head", head, 0, H - 1, f'this model has {H} heads; or "all"')
    if problem:
        return problem
    y_labels, x_labels = example["labels"].get(kind, (None, None))
    heads = list(range(H)) if head == "all" else [head]
    ncols = min(4, len(heads))
    nrows = math.ceil(len(heads) / ncols)
    cell = max(2.6, 0.28 * max(T_q, T_k))
    fig = Figure(figsize=(cell * ncols + 0.8, cell * nrows + 0.6))
    axes = list(fig.subplots(nrows, ncols, squeeze=False).flat)
    for i, ax in enumerate(axes):
        if i >= len(heads):
            ax.axis("off")  # an unused cell of the grid
            continue
        plot_attention(maps[kind][layer, heads[i]], x_labels, y_labels, ax=ax, title=f"head {heads[i]}",
                       colorbar=len(heads) == 1)
        if i % ncols:
            ax.set_ylabel("")
    fig.suptitle(f"{example.get('title') or 'attention'}: {kind}, layer {layer}", fontsize=10)
    fig.tight_layout()
    return fig


def attention_explorer(example_fn: Callable[[int], dict], n_examples: int, kinds: Sequence[str] | None = None):
    """Choose example, kind (e.g. "self"/"cross"), layer and head; `example_fn(i)` -> attention_example(...)."""

    cache: dict[int, dict | str] = {}

    def example(index: int):
        if index not in cache:
            try:
                cache[index] = example_fn(index)
            except Exception as err:  # a broken example is shown as a message, not a traceback
                cache[index] = f"example_fn({index}) failed: {type(err).__name__}: {err}"
        return cache[index]

    first = example(0)
    if isinstance(first, str):
        raise ValueError(first)
    kinds = list(kinds or first["maps"])
    L, H = first["maps"][kinds[0]].shape[:2]

    def draw(example_index: int, kind: str, layer: int, head):
        chosen = example(example_index)
        return chosen if isinstance(chosen, str) else attention_figure(chosen, kind, layer, head)

    controls = {"example_index": slider(widgets.IntSlider, 0, "example", min=0, max=max(0, n_examples - 1)),
                "kind": widgets.Dropdown(options=kinds, value=kinds[0], description="attention"),
                "layer": slider(widgets.IntSlider, L - 1, "layer", min=0, max=L - 1),
                "head": widgets.Dropdown(options=["all"] + list(range(H)), value="all", description="head")}
    return Explorer(draw, controls, "attention explorer")


def sample_text(generate_text: Callable[..., str], prompt: str = "ROMEO:", temperature: float = 0.8, top_k: int = 0,
                top_p: float = 1.0, length: int = 200, seed: int = 0) -> str:
    """Generated text from `generate_text(prompt, temperature=, top_k=, top_p=, max_new_tokens=)`, seeded.

    top_k=0 and top_p=1.0 mean "off" (passed on as None). Bad values give a message instead of text.
    """

    if not isinstance(prompt, str) or not prompt:
        return "prompt must be a non-empty string: the model continues it, so give it at least one character."
    problem = (bad_positive("temperature", temperature, "use top_k=1 for greedy decoding")
               or bad_int("top_k", top_k, 0, meaning="0 = off") or bad_int("length", length, 1, 5000)
               or bad_int("seed", seed, 0))
    if not problem and (isinstance(top_p, bool) or not isinstance(top_p, (int, float)) or not 0 < top_p <= 1):
        problem = f"top_p must be a number in (0, 1] (1 = off), got {top_p!r}."
    if problem:
        return problem
    with torch.random.fork_rng():  # the same settings give the same text; the notebook's random state is kept
        torch.manual_seed(seed)
        try:
            return generate_text(prompt, temperature=temperature, top_k=top_k or None,
                                 top_p=None if top_p >= 1 else top_p, max_new_tokens=length)
        except Exception as err:  # e.g. a character the model's vocabulary does not know
            return f"could not generate: {type(err).__name__}: {err}"


def sampling_explorer(generate_text: Callable[..., str], prompt: str = "ROMEO:", length: int = 200,
                      max_top_k: int = 100):
    """A playground over `sample_text`: prompt, temperature, top-k, top-p, length and seed."""

    controls = {"prompt": widgets.Text(value=prompt, description="prompt", continuous_update=False),
                "temperature": slider(widgets.FloatSlider, 0.8, "temperature", min=0.05, max=2.0, step=0.05),
                "top_k": slider(widgets.IntSlider, 0, "top-k (0 = off)", min=0, max=max_top_k),
                "top_p": slider(widgets.FloatSlider, 1.0, "top-p (1 = off)", min=0.05, max=1.0, step=0.05),
                "length": slider(widgets.IntSlider, length, "length", min=10, max=1000, step=10),
                "seed": widgets.BoundedIntText(value=0, min=0, max=10**6, description="seed")}

    def draw(**values):
        return sample_text(generate_text, **values)

    return Explorer(draw, controls, "sampling playground")
