"""The architecture map (shared.architecture): every kind draws, every name on it exists, `highlight` shades exactly
its boxes and refuses unknown parts, every label stays legible inside its box, every arrow runs from its start box to
its end box, and each notebook's "you are here" map shades a box that notebook builds."""

import ast
import dataclasses
import importlib
import json
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display needed; set here (not via MPLBACKEND) so notebook kernels are unaffected

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from shared import architecture  # noqa: E402
from shared.architecture import DIAGRAMS, KINDS, Link, drawing, parts_of, plot_architecture  # noqa: E402

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
# The parts each kind is expected to offer (the notebooks' "you are here" maps use these names)
PARTS = {
    "encoder_decoder": {"embedding", "positions", "attention", "masks", "cross_attention", "residual", "norm", "ffn",
                        "output", "layers"},
    "gpt": {"embedding", "positions", "attention", "masks", "kv_cache", "residual", "norm", "ffn", "output", "layers",
            "tokenizer", "tiled_attention"},
    "modern": {"embedding", "positions", "attention", "masks", "kv_cache", "residual", "norm", "ffn", "output",
               "layers", "tokenizer", "weights"},
}
# Modules whose parts are made in __init__: the map names them as attributes (layers.DecoderLayer.norm3)
INSTANCES = {"layers.EncoderLayer": dict(d_model=8, n_heads=2, d_ff=16),
             "layers.DecoderLayer": dict(d_model=8, n_heads=2, d_ff=16),
             "layers.PreLNBlock": dict(d_model=8, n_heads=2, d_ff=16),
             "gpt.GPT": dict(config=("gpt.GPTConfig", dict(vocab_size=11, d_model=8, n_heads=2, n_layers=1))),
             "transformer.Transformer": dict(config=("transformer.TransformerConfig",
                                                     dict(src_vocab_size=11, tgt_vocab_size=11, d_model=8, n_heads=2,
                                                          n_encoder_layers=1, n_decoder_layers=1, d_ff=16)))}


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def resolve(dotted: str):
    """"generation.lm.generate" -> the object: the longest prefix that imports as a module of shared, then getattr."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        module = "shared." + ".".join(parts[:i])
        try:
            found = importlib.import_module(module)
        except ModuleNotFoundError as err:
            if not (module + ".").startswith(err.name + "."):  # not a missing part of this path: a broken import
                raise
            continue
        for j, name in enumerate(parts[i:], i):
            if not hasattr(found, name) and ".".join(parts[:j]) in INSTANCES:  # a module's part: build a small one
                kwargs = INSTANCES[".".join(parts[:j])]
                if "config" in kwargs:
                    config, sizes = kwargs["config"]
                    kwargs = {"config": resolve(config)(**sizes)}
                found = found(**kwargs)
            found = getattr(found, name)
        return found
    raise ModuleNotFoundError(f"no module of shared in {dotted!r}")


def labels(diagram) -> list[tuple[str, str, str]]:
    """(where, course object, notebook) for every label on the map: boxes, N× frames, the model in the title."""
    rows = [(f"box {b.key!r}", b.code, b.notebook) for b in diagram.boxes if b.code]
    rows += [(f"frame {f.title!r}", f.code, f.notebook) for f in diagram.frames]
    return rows + [("title", diagram.model, diagram.notebook)]


def unresolved(diagram) -> list[str]:
    """The labels whose course object does not exist in shared."""
    bad = []
    for where, code, _ in labels(diagram):
        try:
            resolve(code)
        except (ImportError, AttributeError) as err:
            bad.append(f"{where}: {code} ({type(err).__name__}: {err})")
    return bad


def face_colours(fig, what: str = "box") -> dict[str, str]:
    """key -> face colour of each box (or each N× frame, by its column, with what="frame")."""
    return {p.get_gid()[len(what) + 1:]: to_hex(p.get_facecolor()) for p in fig.axes[0].patches
            if (p.get_gid() or "").startswith(what + ":")}


def texts(fig) -> list[str]:
    return [t.get_text() for t in fig.axes[0].texts]


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_draws_each_box_with_its_paper_name_and_course_name(kind):
    fig = plot_architecture(kind)
    assert isinstance(fig, Figure)
    boxes = [b for b in DIAGRAMS[kind].boxes if b.code]
    assert sorted(face_colours(fig)) == sorted(b.key for b in boxes)
    drawn = texts(fig)
    for box in boxes:
        assert box.title in drawn and box.code in drawn and box.notebook in drawn, box
    assert 7 <= fig.get_figwidth() <= 8.5 and 9 <= fig.get_figheight() <= 10  # about 7 x 9 inches


def test_the_plotting_module_offers_it_and_it_draws_into_given_axes():
    from shared.plotting import plot_architecture as from_plotting

    assert from_plotting is plot_architecture
    fig, ax = plt.subplots(figsize=DIAGRAMS["gpt"].size)
    assert plot_architecture("gpt", ax=ax) is fig
    assert len(fig.axes) == 1 and face_colours(fig)


@pytest.mark.parametrize("kind", KINDS)
def test_shapes_are_written_on_the_arrows_only_when_asked(kind):
    diagram = DIAGRAMS[kind]
    shapes = {b.shape for b in diagram.boxes if b.shape} | {link.shape for link in diagram.links if link.shape}
    with_shapes, without = " ".join(texts(plot_architecture(kind, shapes=True))), texts(plot_architecture(kind))
    assert all(shape in with_shapes for shape in shapes)
    assert not any(shape in text for shape in shapes for text in without)
    assert any("d_model)" in shape for shape in shapes)  # the flow is walked in the course's own names


def test_a_bad_kind_or_shapes_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="encoder_decoder, gpt, modern"):
        plot_architecture("llama")
    with pytest.raises(ValueError, match="encoder_decoder, gpt, modern"):
        plot_architecture(["gpt"])
    with pytest.raises(ValueError, match="shapes"):
        plot_architecture("gpt", shapes="yes")
    with pytest.raises(TypeError, match="highlight"):
        plot_architecture("gpt", highlight=3)


@pytest.mark.parametrize("kind", KINDS)
def test_every_highlight_name_is_validated(kind):
    assert set(parts_of(kind)) == PARTS[kind]
    plot_architecture(kind, highlight=parts_of(kind)[0])  # one name as a string (each alone: the next test)
    plot_architecture(kind, highlight=parts_of(kind))  # all at once
    other = sorted(set().union(*PARTS.values()) - PARTS[kind]) or ["kv_cache"]
    assert face_colours(plot_architecture(kind, highlight=None)) == face_colours(plot_architecture(kind))
    for bad in ["atention", "Attention", "", *other]:  # a typo, the wrong case, empty, a part of another kind
        with pytest.raises(ValueError, match=f"'{bad}' is not a part of kind '{kind}'") as err:
            plot_architecture(kind, highlight=("attention", bad))
        assert ", ".join(parts_of(kind)) in str(err.value)  # the message lists every valid name


@pytest.mark.parametrize("kind", KINDS)
def test_highlighting_shades_exactly_the_named_boxes(kind):
    plain = plot_architecture(kind)
    plain_boxes, plain_frames = face_colours(plain), face_colours(plain, "frame")
    assert len(set(plain_boxes.values())) == 1  # without highlight every box looks the same
    assert len(plain_frames) == len(DIAGRAMS[kind].frames) and len(set(plain_frames.values())) == 1
    for part in parts_of(kind):
        fig = plot_architecture(kind, highlight=[part])
        boxes, frames = face_colours(fig), face_colours(fig, "frame")
        changed = {key for key in plain_boxes if boxes[key] != plain_boxes[key]}
        assert changed == {b.key for b in DIAGRAMS[kind].boxes if part in b.parts}, part
        changed_frames = {key for key in plain_frames if frames[key] != plain_frames[key]}
        assert changed_frames == {f.column for f in DIAGRAMS[kind].frames if part in f.parts}, part
        assert changed or changed_frames  # every part shades at least one box or frame


def test_each_add_and_norm_box_names_its_own_norm_in_the_order_of_the_walk_through():
    """Notebook 05 calls the encoder's two norms norm1, norm2 and the decoder's three norm1..norm3, bottom to top;
    each Add & Norm box names its own, and each is a LayerNorm of that layer."""
    import torch.nn as nn

    for layer, column in (("EncoderLayer", "enc"), ("DecoderLayer", "dec")):
        adds = sorted((b for b in DIAGRAMS["encoder_decoder"].boxes if b.title == "Add & Norm" and b.column == column),
                      key=lambda b: b.row)
        assert [b.code for b in adds] == [f"layers.{layer}.norm{i}" for i in range(1, len(adds) + 1)]
        assert len(adds) == {"enc": 2, "dec": 3}[column]
        assert all(isinstance(resolve(b.code), nn.LayerNorm) for b in adds)
    norms = [b.code for kind in KINDS for b in DIAGRAMS[kind].boxes if "norm" in b.parts and b.column != "side"]
    assert not any(code.endswith(".forward") for code in norms)  # a norm box names the norm, not the layer's forward


def test_the_norm_boxes_name_the_blocks_own_norms_and_the_modern_ones_are_rmsnorms():
    """Both decoder-only maps label the block's norms by the attributes the block has (norm1, norm2) and the final
    one as GPT.norm; built with the modern map's options, each of them is an RMSNorm."""
    from shared.gpt import GPT, GPTConfig
    from shared.norms import RMSNorm

    for kind in ("gpt", "modern"):
        norms = sorted((b for b in DIAGRAMS[kind].boxes if "norm" in b.parts), key=lambda b: b.row)
        assert [b.code for b in norms] == ["layers.PreLNBlock.norm1", "layers.PreLNBlock.norm2", "gpt.GPT.norm"]
    model = GPT(GPTConfig(vocab_size=11, d_model=8, n_heads=2, n_layers=1, **DIAGRAMS["modern"].options))
    assert all(isinstance(norm, RMSNorm) for norm in (model.blocks[0].norm1, model.blocks[0].norm2, model.norm))


def test_05s_maps_shade_what_its_text_is_about():
    """The "you are here" map shades the FFN and the Add & Norm boxes (not attention, built in 02); the walk-through
    map shades the two layers (the N× frames), so its boxes stay plain and every name and shape on them readable."""
    nb = json.loads((NOTEBOOKS / "05_transformer_block.ipynb").read_text(encoding="utf-8"))
    calls = [c["source"] if isinstance(c["source"], str) else "".join(c["source"]) for c in nb["cells"]
             if c["cell_type"] == "code" and "plot_architecture(" in "".join(c["source"])]
    assert len(calls) == 2
    boxes = {b.key: b for b in DIAGRAMS["encoder_decoder"].boxes}
    for source, expected_boxes, expected_frames in (
            (calls[0], {"enc_ffn", "dec_ffn", "enc_add1", "enc_add2", "dec_add1", "dec_add2", "dec_add3"}, set()),
            (calls[1], set(), {"enc", "dec"})):
        highlight = ast.literal_eval(re.search(r"highlight=(\([^)]*\))", source).group(1))
        fig = plot_architecture("encoder_decoder", highlight=highlight)
        lit = {key for key, colour in face_colours(fig).items() if colour == to_hex(architecture.HIGHLIGHT)}
        assert lit == expected_boxes, source
        assert not lit & {"enc_attn", "dec_attn", "dec_cross"}
        assert all(boxes[key].notebook == "05" for key in lit)
        frames = {key for key, colour in face_colours(fig, "frame").items() if colour == to_hex(architecture.FRAME_LIT)}
        assert frames == expected_frames, source


def first_map(source: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The kinds and the highlight of the first plot_architecture call in a notebook's code (a loop's kinds too)."""
    tree = ast.parse(source)
    call = next(node for node in ast.walk(tree) if isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", "")) == "plot_architecture")
    kind = call.args[0]
    if isinstance(kind, ast.Name):  # for kind in ("encoder_decoder", "gpt"): ...
        loop = next(node for node in ast.walk(tree) if isinstance(node, ast.For)
                    and getattr(node.target, "id", None) == kind.id)
        kinds = tuple(ast.literal_eval(loop.iter))
    else:
        kinds = (ast.literal_eval(kind),)
    highlight = next((ast.literal_eval(k.value) for k in call.keywords if k.arg == "highlight"), ())
    return kinds, (highlight,) if isinstance(highlight, str) else tuple(highlight)


def code_of(notebook: str) -> str:
    """The first code cell of notebooks/NN_*.ipynb that draws the map."""
    nb = json.loads(next(NOTEBOOKS.glob(f"{notebook}_*.ipynb")).read_text(encoding="utf-8"))
    return next("".join(c["source"]) for c in nb["cells"]
                if c["cell_type"] == "code" and "plot_architecture(" in "".join(c["source"]))


def own_boxes_shaded(notebook: str, source: str) -> tuple[set[str], set[str]]:
    """(the boxes and frames tabbed with this notebook on its first map, those of them the map shades)."""
    kinds, highlight = first_map(source)
    own, lit = set(), set()
    for kind in kinds:
        fig = plot_architecture(kind, highlight=highlight)
        boxes = {f"{kind}:{k}" for k, c in face_colours(fig).items() if c == to_hex(architecture.HIGHLIGHT)}
        frames = {f"{kind}:frame:{k}" for k, c in face_colours(fig, "frame").items()
                  if c == to_hex(architecture.FRAME_LIT)}
        own |= {f"{kind}:{b.key}" for b in DIAGRAMS[kind].boxes if b.notebook == notebook}
        own |= {f"{kind}:frame:{f.column}" for f in DIAGRAMS[kind].frames if f.notebook == notebook}
        lit |= boxes | frames
    return own, own & lit


# Notebooks whose first map draws no box tabbed with their number (the test checks that it does not)
ADDS_NO_BOX = {"01": "its attention function works inside notebook 02's attention boxes",
               "07": "it trains the models of notebooks 05 and 06",
               "09": "it compares positions on the GPT map; RoPE's box (tabbed 09) is on the modern map",
               "11": "it runs notebook 08's whole GPT on several processes",
               "12": "the capstone combines the parts of 01-11"}


@pytest.mark.parametrize("notebook", sorted(path.name[:2] for path in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")))
def test_each_notebooks_you_are_here_map_shades_a_box_it_builds(notebook):
    """The first map of a notebook shades at least one box (or N× frame) tabbed with its number."""
    own, shaded = own_boxes_shaded(notebook, code_of(notebook))
    if notebook in ADDS_NO_BOX:
        assert not own, f"notebook {notebook}'s map has boxes of its own now: {sorted(own)}"
    else:
        assert shaded, f"notebook {notebook}'s first map shades none of its boxes {sorted(own)}"


def test_the_you_are_here_check_catches_a_map_shading_another_notebooks_boxes():
    """Planted: 15 shading only the attention (02), 13 only the token embedding (08)."""
    for notebook, right, wrong in (("15", '("attention", "tiled_attention")', '("attention",)'),
                                   ("13", '("tokenizer",)', '("embedding",)')):
        source = code_of(notebook)
        assert f"highlight={right}" in source
        own, shaded = own_boxes_shaded(notebook, source.replace(f"highlight={right}", f"highlight={wrong}", 1))
        assert own and not shaded


def arrow_problems(kind: str) -> list[str]:
    """Each extra arrow starts on its start box's edge and ends on its end box's edge, the edges that face each other:
    a side arrow from the start's right edge into the end's left when it runs rightward (else left into right); the
    memory up out of the start's top into the end's left edge; the tied weights from the right edge into the right
    edge (the rail is at the far right); the loaded weights from the right edge onto the left edge of the end box's
    N× frame."""
    d = DIAGRAMS[kind]
    ax = plot_architecture(kind).axes[0]
    heads = {t.get_gid()[5:]: t for t in ax.texts if (t.get_gid() or "").startswith("link:")}
    paths = {line.get_gid()[5:]: line for line in ax.lines if (line.get_gid() or "").startswith("path:")}
    boxes = {b.key: b for b in d.boxes}

    def on_edge(point, edges, tol=0.02):
        (x, y), (left, right, bottom, top) = point, edges
        inside = left - tol <= x <= right + tol and bottom - tol <= y <= top + tol
        deep = left + tol < x < right - tol and bottom + tol < y < top - tol
        return inside and not deep

    problems = []
    for link in d.links:
        name = f"{link.start}->{link.end}"
        if name not in heads:
            problems.append(f"{name}: not drawn")
            continue
        tail = tuple(paths[name].get_xydata()[0]) if name in paths else heads[name].xyann
        start = drawing._edges(d, boxes[link.start])
        if link.style == "weights":
            frame = next(f for f in d.frames if f.column == boxes[link.end].column)
            left, _, bottom, top = drawing._frame_edges(d, frame)
            end = (left, left, bottom, top)  # the frame's left edge
        else:
            end = drawing._edges(d, boxes[link.end])
        if not on_edge(tail, start):
            problems.append(f"{name}: starts at {tail}, off {link.start!r}")
        if not on_edge(heads[name].xy, end):
            problems.append(f"{name}: ends at {heads[name].xy}, off {link.end!r}")
        rightward = end[0] > start[1]
        if link.style == "memory":
            tail_at, head_at = ("top", tail[1], start[3]), ("left", heads[name].xy[0], end[0])
        elif link.style in ("tied", "weights"):
            tail_at = ("right", tail[0], start[1])
            head_at = ("right", heads[name].xy[0], end[1]) if link.style == "tied" else ("left", heads[name].xy[0],
                                                                                         end[0])
        else:
            tail_at = ("right", tail[0], start[1]) if rightward else ("left", tail[0], start[0])
            head_at = ("left", heads[name].xy[0], end[0]) if rightward else ("right", heads[name].xy[0], end[1])
        for which, (edge, got, want) in zip(("starts", "ends"), (tail_at, head_at)):
            if abs(got - want) > 0.02:
                problems.append(f"{name}: {which} at {got:.2f}, not on the {edge} edge ({want:.2f})")
    return problems


# Part II's arrows, start -> end: tiled attention beside the attention, the tokenizer at both ends, the weights file
PART_II_LINKS = {"gpt": {("tiled", "attn"), ("encode", "tokens"), ("softmax", "decode")},
                 "modern": {("encode", "tokens"), ("softmax", "decode"), ("weights", "ffn")}}


@pytest.mark.parametrize("kind", KINDS)
def test_each_arrow_runs_from_its_start_box_to_its_end_box(kind):
    assert PART_II_LINKS.get(kind, set()) <= {(link.start, link.end) for link in DIAGRAMS[kind].links}
    assert arrow_problems(kind) == []


def test_the_arrow_check_catches_a_reversed_link(monkeypatch):
    """Planted: the tokenizer's arrow into the token ids reversed in the table, then every arrow drawn backwards."""
    gpt = DIAGRAMS["gpt"]
    reversed_links = tuple(Link("tokens", "encode") if (link.start, link.end) == ("encode", "tokens") else link
                           for link in gpt.links)
    assert PART_II_LINKS["gpt"] - {(link.start, link.end) for link in reversed_links} == {("encode", "tokens")}
    original = drawing._arrow
    monkeypatch.setattr(drawing, "_arrow", lambda ax, points, *args, **kw: original(ax, points[::-1], *args, **kw))
    problems = [p for p in arrow_problems("gpt") if ", off '" in p]  # each end off its box (and on no right edge)
    assert len(problems) == 2 * len(gpt.links), problems


@pytest.mark.parametrize("kind, style, end", [("gpt", "side", -1), ("gpt", "side", 0), ("gpt", "tied", -1),
                                             ("gpt", "tied", 0), ("encoder_decoder", "memory", -1)])
def test_the_arrow_check_catches_an_arrow_on_a_far_edge(monkeypatch, kind, style, end):
    """Planted: the head (end -1) or the tail (end 0) of each arrow of one style moved to the far edge of its box (the
    point mirrored about the box's centre): still on the box's edge, but not the edge that faces the other box."""
    d = DIAGRAMS[kind]
    boxes = {b.key: b for b in d.boxes}
    styles = {f"{link.start}->{link.end}": link.style for link in d.links}
    original = drawing._arrow

    def far_edge(ax, points, *args, gid=None, **kw):
        if gid and (styles.get(gid) == style or style == "side" and styles.get(gid) in ("both", "same")):
            left, right, _, _ = drawing._edges(d, boxes[gid.split("->")[1 if end == -1 else 0]])
            points = list(points)
            points[end] = (left + right - points[end][0], points[end][1])
        return original(ax, points, *args, gid=gid, **kw)

    monkeypatch.setattr(drawing, "_arrow", far_edge)
    planted = {name for name, s in styles.items() if s == style or style == "side" and s in ("both", "same")}
    which = "ends" if end == -1 else "starts"
    problems = arrow_problems(kind)
    assert {p.split(":")[0] for p in problems} == planted, problems
    assert all(f": {which} at " in p for p in problems), problems


@pytest.mark.parametrize("kind", KINDS)
def test_every_course_name_on_the_map_exists_in_shared(kind):
    assert unresolved(DIAGRAMS[kind]) == []
    if DIAGRAMS[kind].options:  # the options written under the title build a model
        resolve(DIAGRAMS[kind].model)(vocab_size=11, **DIAGRAMS[kind].options)


def test_the_name_check_catches_a_label_naming_nothing():
    """A planted misspelling is reported, so the test above can fail."""
    diagram = DIAGRAMS["gpt"]
    box = dataclasses.replace(diagram.boxes[1], code="attention.MultiHeadAtention")
    planted = dataclasses.replace(diagram, boxes=(box, *diagram.boxes[2:]), model="gpt.Gpt")
    assert [line.split(":")[0] for line in unresolved(planted)] == [f"box {box.key!r}", "title"]
    assert "MultiHeadAtention" in unresolved(planted)[0]


@pytest.mark.parametrize("kind", KINDS)
def test_every_notebook_number_names_an_existing_notebook(kind):
    numbers = {path.name[:2] for path in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")}
    for where, _, notebook in labels(DIAGRAMS[kind]):
        assert notebook in numbers, f"{where}: notebook {notebook!r} is not one of notebooks/NN_*.ipynb"


@pytest.mark.parametrize("kind", KINDS)
def test_labels_are_legible_inside_their_boxes(kind):
    """Fonts of 8 pt or more; each title and course name inside its box; boxes apart; nothing off the figure;
    frame labels left of the arrow that leaves the frame."""
    fig = plot_architecture(kind, highlight=parts_of(kind), shapes=True)
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    assert all(t.get_fontsize() >= 8 for t in ax.texts)
    figure_box = fig.bbox
    for t in ax.texts:
        extent = t.get_window_extent(renderer)
        assert figure_box.x0 <= extent.x0 and extent.x1 <= figure_box.x1 and extent.y1 <= figure_box.y1, t.get_text()
    patches = {p.get_gid()[4:]: p.get_window_extent(renderer) for p in ax.patches if (p.get_gid() or "")[:4] == "box:"}
    for t in ax.texts:
        kind_of, _, key = (t.get_gid() or "").partition(":")
        if kind_of in ("title", "code"):
            inner = patches[key].padded(-2)  # 2 px clear of the edge
            extent = t.get_window_extent(renderer)
            assert inner.x0 <= extent.x0 and extent.x1 <= inner.x1, f"{t.get_text()!r} overflows box {key!r}"
            assert inner.y0 <= extent.y0 and extent.y1 <= inner.y1, f"{t.get_text()!r} overflows box {key!r}"
    keys = sorted(patches)
    for i, a in enumerate(keys):
        for b in keys[i + 1:]:
            assert not patches[a].overlaps(patches[b]), f"boxes {a!r} and {b!r} overlap"
    for frame in DIAGRAMS[kind].frames:
        centre = ax.transData.transform((DIAGRAMS[kind].columns[frame.column][0], 0))[0]
        for t in ax.texts:
            if t.get_text() in (frame.title, frame.code):
                assert t.get_window_extent(renderer).x1 < centre - 2, f"{t.get_text()!r} crosses the upward arrow"


def test_the_module_draws_with_matplotlib_alone():
    """The map is a tools-layer module: matplotlib and shared.validation, nothing from the model or teaching."""
    sources = [path.read_text(encoding="utf-8") for path in Path(architecture.__file__).parent.glob("*.py")]
    assert len(sources) == 3
    imports = {line.split()[1] for source in sources for line in source.splitlines()
               if line.startswith(("import ", "from "))}
    assert imports <= {"__future__", "textwrap", "dataclasses", "matplotlib.pyplot", "matplotlib.patches",
                       "..validation", ".diagrams", ".drawing"}, imports


@pytest.mark.parametrize("kind", KINDS)
def test_no_label_beside_the_boxes_overlaps_a_box_or_another_label(kind):
    """Shapes, link labels, inputs and outputs, frame names and the key: each clear of every box and of each other."""
    fig = plot_architecture(kind, highlight=parts_of(kind), shapes=True)
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    boxes = {p.get_gid(): p.get_window_extent(renderer) for p in ax.patches if (p.get_gid() or "")[:4] == "box:"}
    free = [t for t in ax.texts if not t.get_gid() and t.get_color() != "white" and t.get_text()]  # not tabs
    extents = [(t.get_text(), t.get_window_extent(renderer)) for t in free]
    for text, extent in extents:
        for gid, box in boxes.items():
            assert not extent.overlaps(box), f"{text!r} overlaps {gid}"
    for i, (a, ea) in enumerate(extents):
        for b, eb in extents[i + 1:]:
            assert not ea.overlaps(eb), f"{a!r} overlaps {b!r}"
