"""The architecture map (shared.architecture): every kind draws, every name on it exists, `highlight` shades exactly
its boxes and refuses unknown parts, and every label stays legible inside its box."""

import dataclasses
import importlib
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display needed; set here (not via MPLBACKEND) so notebook kernels are unaffected

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from shared import architecture  # noqa: E402
from shared.architecture import DIAGRAMS, KINDS, parts_of, plot_architecture  # noqa: E402

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
# The parts each kind is expected to offer (the notebooks' "you are here" maps use these names)
PARTS = {
    "encoder_decoder": {"embedding", "positions", "attention", "masks", "cross_attention", "residual", "norm", "ffn",
                        "output"},
    "gpt": {"embedding", "positions", "attention", "masks", "kv_cache", "residual", "norm", "ffn", "output"},
    "modern": {"embedding", "positions", "attention", "masks", "kv_cache", "residual", "norm", "ffn", "output"},
}


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
        for name in parts[i:]:
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


def face_colours(fig) -> dict[str, str]:
    return {p.get_gid()[4:]: to_hex(p.get_facecolor()) for p in fig.axes[0].patches
            if (p.get_gid() or "").startswith("box:")}


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
    plain = face_colours(plot_architecture(kind))
    assert len(set(plain.values())) == 1  # without highlight every box looks the same
    for part in parts_of(kind):
        shaded = face_colours(plot_architecture(kind, highlight=[part]))
        changed = {key for key in plain if shaded[key] != plain[key]}
        assert changed == {b.key for b in DIAGRAMS[kind].boxes if part in b.parts}, part
        assert changed  # every part shades at least one box


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
    source = Path(architecture.__file__).read_text(encoding="utf-8")
    imports = {line.split()[1] for line in source.splitlines() if line.startswith(("import ", "from "))}
    assert imports <= {"__future__", "textwrap", "dataclasses", "matplotlib.pyplot", "matplotlib.patches",
                       ".validation"}, imports
