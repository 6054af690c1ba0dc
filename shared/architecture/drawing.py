"""Drawing the map: boxes, N× frames, the upward flow with its residual skips, and the side arrows (tables in
`diagrams`)."""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
from matplotlib.patches import FancyBboxPatch, Rectangle

from ..validation import check_bool
from .diagrams import Box, Diagram, Frame, Link, diagram, parts_of

# Sizes in inches (the axes' data units) and points; colours
PITCH, BOX_H, FRAME_PAD, FRAME_TOP, FRAME_BOTTOM, BOTTOM, SKIP = 0.66, 0.44, 0.2, 0.42, 0.14, 0.6, 0.1
LABEL_W = 1.0  # the width an input/output label (a box without code) takes, for arrows that end beside it
TITLE_PT, CODE_PT, SMALL_PT = 9, 8, 8
FACE, EDGE, HIGHLIGHT, HIGHLIGHT_EDGE = "#f4f4f4", "#555555", "#ffcf70", "#c0392b"
FRAME_FACE, FRAME_LIT = "#fbfbfb", "#fdecc8"  # an N× frame's background, plain and shaded
BADGE, SHAPE, LINE = "#2c3e50", "#1f5f8b", "#333333"


def _check_highlight(kind: str, highlight) -> set[str]:
    if isinstance(highlight, str) or highlight is None:
        names = () if highlight is None else (highlight,)
    else:
        try:
            names = tuple(highlight)
        except TypeError:
            raise TypeError(f"highlight must be a part name or several, got {highlight!r}") from None
    valid = parts_of(kind)
    for name in names:
        if name not in valid:
            raise ValueError(f"highlight: {name!r} is not a part of kind {kind!r}; choose from {', '.join(valid)}")
    return set(names)


def _y(row: float) -> float:
    return BOTTOM + row * PITCH


def _edges(d: Diagram, box: Box) -> tuple[float, float, float, float]:
    """A box's left, right, bottom and top, in inches."""
    x, w, _ = d.columns[box.column]
    w = w if box.code else LABEL_W
    return x - w / 2, x + w / 2, _y(box.row) - BOX_H / 2, _y(box.row) + BOX_H / 2


def _frame_edges(d: Diagram, f: Frame) -> tuple[float, float, float, float]:
    x, w, _ = d.columns[f.column]
    return (x - w / 2 - FRAME_PAD, x + w / 2 + FRAME_PAD, _y(f.first) - BOX_H / 2 - FRAME_BOTTOM,
            _y(f.last) + BOX_H / 2 + FRAME_TOP)


def _badge(ax, x: float, top: float, notebook: str) -> None:
    """The notebook's tab, sitting on the top edge of a box or frame (above its text)."""
    ax.text(x, top + 0.045, notebook, ha="center", va="center", fontsize=SMALL_PT, fontweight="bold", color="white",
            bbox=dict(boxstyle="round,pad=0.2", facecolor=BADGE, edgecolor="none"), zorder=5)


def _arrow(ax, points, color=LINE, both=False, dashed=False, lw=1.1, gid=None) -> None:
    """A polyline through `points` with a head at the end (and at the start when `both`); a link's `gid` names its
    head "link:START->END" and its polyline "path:START->END"."""
    style = "--" if dashed else "-"
    head = dict(color=color, lw=lw, linestyle=style, shrinkA=0, shrinkB=0, mutation_scale=11)
    if len(points) > 2:
        ax.plot(*zip(*points[:-1]), style, color=color, lw=lw, zorder=1, gid=gid and "path:" + gid)
    ax.annotate("", xy=points[-1], xytext=points[-2], zorder=2, gid=gid and "link:" + gid,
                arrowprops=dict(arrowstyle="<|-|>" if both and len(points) == 2 else "-|>", **head))
    if both and len(points) > 2:
        ax.annotate("", xy=points[0], xytext=points[1], zorder=2, arrowprops=dict(arrowstyle="-|>", **head))


def _draw_frame(ax, d: Diagram, f: Frame, lit: bool) -> None:
    """The dashed N× frame; its title and course object left of the upward arrow, its tab on the right."""
    left, right, bottom, top = _frame_edges(d, f)
    ax.add_patch(Rectangle((left, bottom), right - left, top - bottom, facecolor=FRAME_LIT if lit else FRAME_FACE,
                           edgecolor=HIGHLIGHT_EDGE if lit else "#888888", lw=2 if lit else 1,
                           linestyle=(0, (4, 2)), zorder=0, gid=f"frame:{f.column}"))
    ax.text(left + 0.1, top - 0.13, f.title, ha="left", va="center", fontsize=TITLE_PT, fontweight="bold")
    ax.text(left + 0.1, top - 0.3, f.code, ha="left", va="center", fontsize=CODE_PT, family="monospace")
    _badge(ax, right - 0.25, top, f.notebook)


def _draw_box(ax, d: Diagram, box: Box, lit: bool, shapes: bool) -> None:
    x, _, side = d.columns[box.column]
    if not box.code:  # an input or output: plain text
        label = f"{box.title}\n{box.shape}" if shapes and box.shape else box.title
        ax.text(x, _y(box.row), label, ha="center", va="center", fontsize=TITLE_PT, style="italic")
        return
    left, right, bottom, top = _edges(d, box)
    patch = FancyBboxPatch((left, bottom), right - left, BOX_H, boxstyle="round,pad=0,rounding_size=0.06",
                           facecolor=HIGHLIGHT if lit else FACE, edgecolor=HIGHLIGHT_EDGE if lit else EDGE,
                           lw=2 if lit else 1, zorder=3, gid=f"box:{box.key}")
    ax.add_patch(patch)
    ax.text(x, _y(box.row) + 0.09, box.title, ha="center", va="center", fontsize=TITLE_PT, fontweight="bold",
            zorder=4, gid=f"title:{box.key}")
    ax.text(x, _y(box.row) - 0.1, box.code, ha="center", va="center", fontsize=CODE_PT, family="monospace",
            zorder=4, gid=f"code:{box.key}")
    _badge(ax, right - 0.25 if side else left + 0.25, top, box.notebook)  # away from the shape labels


def _draw_flow(ax, d: Diagram, column: str, shaded: set, shapes: bool) -> None:
    """The upward arrows of one column, their shapes, and the residual skips beside them."""
    x, _, side = d.columns[column]
    if not side:
        return
    boxes = {box.key: box for box in d.boxes}
    frames = [_frame_edges(d, f) for f in d.frames if f.column == column]
    stack = sorted((b for b in d.boxes if b.column == column), key=lambda b: b.row)
    for low, high in zip(stack, stack[1:]):
        start = _edges(d, low)[3] if low.code else _y(low.row) + (0.2 if shapes and low.shape else 0.1)
        end = _edges(d, high)[2] if high.code else _y(high.row) - 0.1
        _arrow(ax, [(x, start), (x, end)])
        if shapes and low.shape and low.code:  # between the boxes, clear of any frame edge it crosses
            mid = (start + end) / 2
            for _, _, f_bottom, f_top in frames:
                mid = (f_top + end) / 2 if start < f_top < end else (start + f_bottom) / 2 if start < f_bottom < end \
                    else mid
            ax.text(x - 0.1, mid, low.shape, ha="right", va="center", fontsize=SMALL_PT, color=SHAPE, zorder=4)
        if high.skip_from:  # the residual: branch below the sub-layer, run beside it, join the add
            left, right, bottom, _ = _edges(d, boxes[high.skip_from])
            branch, join = bottom - 0.08, right if side > 0 else left
            rail = join + side * SKIP
            color = HIGHLIGHT_EDGE if "residual" in shaded else LINE
            _arrow(ax, [(x, branch), (rail, branch), (rail, _y(high.row)), (join, _y(high.row))], color=color)
            ax.plot([x], [branch], "o", color=color, ms=3.5, zorder=2)


def _draw_link(ax, d: Diagram, link: Link, shaded: set, shapes: bool) -> None:
    boxes = {box.key: box for box in d.boxes}
    start, end = boxes[link.start], boxes[link.end]
    s_left, s_right, _, s_top = _edges(d, start)
    e_left, e_right, _, _ = _edges(d, end)
    y0, y1 = _y(start.row), _y(end.row)
    color = HIGHLIGHT_EDGE if shaded & set(link.parts or start.parts) else LINE
    gid = f"{link.start}->{link.end}"
    if link.style == "memory":  # up out of the encoder, across, into the cross-attention's side
        x0, up, across = (s_left + s_right) / 2, s_top + FRAME_TOP + 0.25, e_left - 0.35
        _arrow(ax, [(x0, s_top), (x0, up), (across, up), (across, y1 + 0.08), (e_left, y1 + 0.08)], color, lw=1.5,
               gid=gid)
        label = f"{link.label}\n{link.shape}" if shapes and link.shape else link.label
        ax.text((x0 + across) / 2 + 0.3, up + 0.05, label, ha="center", va="bottom", fontsize=SMALL_PT,
                style="italic", color=color)
    elif link.style == "weights":  # dashed, into the N× frame around the end box: every block's weights
        x1 = min(_frame_edges(d, f)[0] for f in d.frames if f.column == end.column)
        _arrow(ax, [(s_right, y0), (x1, y0)], color, dashed=True, gid=gid)
        ax.text(s_left + 0.05, y0 - BOX_H / 2 - 0.03, link.label, ha="left", va="top", fontsize=SMALL_PT,
                style="italic", color=color)
    elif link.style == "tied":  # dashed, at the far right: the output layer reuses the embedding matrix
        rail = max(s_right, e_right) + FRAME_PAD + 0.55
        _arrow(ax, [(s_right, y0), (rail, y0), (rail, y1), (e_right, y1)], color, both=True, dashed=True, gid=gid)
        ax.text(rail + 0.13, (y0 + y1) / 2, link.label, rotation=90, ha="center", va="center", fontsize=SMALL_PT,
                color=color)
    else:  # a side input, from the facing edges; it lands on the end box's half that faces the start
        rightward = e_left > s_right
        x0, x1 = (s_right, e_left) if rightward else (s_left, e_right)
        _arrow(ax, [(x0, y0), (x1, y1 + max(-0.1, min(0.1, y0 - y1)))], color, both=link.style == "both",
               dashed=link.style == "same", gid=gid)
        if link.label:  # under the start box, at its outer end (its inner end carries the shape)
            ax.text(s_left + 0.05 if rightward else s_right - 0.05, y0 - BOX_H / 2 - 0.03, link.label,
                    ha="left" if rightward else "right", va="top", fontsize=SMALL_PT, style="italic", color=color)
        if shapes and link.shape:
            ax.text(x0, y0 - BOX_H / 2 - 0.03, link.shape, ha="right" if rightward else "left", va="top",
                    fontsize=SMALL_PT, color=SHAPE)


def plot_architecture(kind: str, highlight=(), ax=None, shapes: bool = False):
    """Draw the whole model as a map: each box gives the paper's name, the course object in `shared` that
    implements it, and (on its tab) the notebook that builds it.

    kind: "encoder_decoder" (2017), "gpt" (GPT-2) or "modern" (Llama-style). highlight: a part name or several
    to shade, e.g. ("attention", "masks"); `parts_of(kind)` lists them. shapes=True writes tensor shapes on the
    arrows. Returns the figure (ax's figure when ax is given; that axes should be about DIAGRAMS[kind].size inches).
    In a notebook write `fig = plot_architecture(...)`: a bare call on a cell's last line shows the figure twice.
    """
    d = diagram(kind)
    shaded = _check_highlight(kind, highlight)
    check_bool("shapes", shapes)
    if ax is None:
        ax = plt.figure(figsize=d.size).add_axes((0, 0, 1, 1))
    width, height = d.size
    ax.set(xlim=(0, width), ylim=(0, height), aspect="equal")
    ax.axis("off")
    for frame in d.frames:
        _draw_frame(ax, d, frame, bool(shaded & set(frame.parts)))
    for box in d.boxes:
        _draw_box(ax, d, box, bool(shaded & set(box.parts)), shapes)
    for column in d.columns:
        _draw_flow(ax, d, column, shaded, shapes)
    for link in d.links:
        _draw_link(ax, d, link, shaded, shapes)
    ax.text(width / 2, height - 0.22, d.title, ha="center", va="center", fontsize=11, fontweight="bold")
    options = ", ".join(f"{name}={value!r}" for name, value in (d.options or {}).items())
    model = f"{d.model}({options})" if options else d.model
    ax.text(width / 2, height - 0.42, textwrap.fill(f"{model}  (notebook {d.notebook})", 72, subsequent_indent="    "),
            ha="center", va="top", multialignment="left", fontsize=CODE_PT, family="monospace")
    key = "box: the paper's name / the course's code (in shared) · tab: the notebook that builds it"
    ax.text(width / 2, 0.12, key + (f"\nshaded: {', '.join(sorted(shaded))}" if shaded else ""), ha="center",
            va="bottom", fontsize=SMALL_PT, color="#444444")
    return ax.figure
