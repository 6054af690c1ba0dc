"""Explorer callbacks, headless: good values give the expected figure or text, bad values a clear message."""

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from shared import explorers as E  # noqa: E402

WIDGET = "application/vnd.jupyter.widget-view+json"


def n_images(fig: Figure) -> int:
    return sum(len(ax.images) for ax in fig.axes)


# ---------------------------------------------------------------- 01 softmax scaling


def test_softmax_scaling_figure_shows_sharper_unscaled_attention():
    fig = E.softmax_scaling_figure(d_k=256, temperature=1.0, n_keys=6)
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    unscaled, scaled = ([bar.get_height() for bar in ax.patches] for ax in fig.axes)
    assert len(unscaled) == len(scaled) == 6
    assert sum(unscaled) == pytest.approx(1.0) and sum(scaled) == pytest.approx(1.0)
    assert max(unscaled) > max(scaled)  # without 1/sqrt(d_k) the softmax saturates
    assert "d_k = 256" in fig._suptitle.get_text()


def test_softmax_scaling_figure_temperature_flattens():
    hot = E.softmax_scaling_figure(d_k=16, temperature=10.0, n_keys=8)
    cold = E.softmax_scaling_figure(d_k=16, temperature=0.1, n_keys=8)
    heights = [max(bar.get_height() for bar in fig.axes[1].patches) for fig in (hot, cold)]
    assert heights[0] < heights[1]


@pytest.mark.parametrize("kwargs, word", [({"d_k": 0}, "d_k"), ({"d_k": 2.5}, "d_k"),
                                          ({"temperature": 0}, "temperature"), ({"temperature": -1.0}, "temperature"),
                                          ({"n_keys": 1}, "n_keys")])
def test_softmax_scaling_bad_values_give_a_message(kwargs, word):
    message = E.softmax_scaling_figure(**kwargs)
    assert isinstance(message, str) and message.startswith(word) and repr(list(kwargs.values())[0]) in message


# ---------------------------------------------------------------- 04 positional encoding


def test_positional_encoding_figure():
    fig = E.positional_encoding_figure(d_model=32, n_positions=50, pair=3)
    assert isinstance(fig, Figure)
    assert len(fig.axes) == 3  # heatmap, curves, the heatmap's colorbar
    heatmap, curves, _ = fig.axes
    assert heatmap.images[0].get_array().shape == (50, 32)
    sin_line, cos_line = curves.lines
    assert len(sin_line.get_xdata()) == 50
    assert sin_line.get_ydata()[0] == pytest.approx(0.0) and cos_line.get_ydata()[0] == pytest.approx(1.0)
    assert "pair i=3" in curves.get_title()


@pytest.mark.parametrize("kwargs, word", [({"d_model": 0}, "d_model"), ({"d_model": 63}, "even"),
                                          ({"n_positions": 0}, "n_positions"), ({"d_model": 16, "pair": 8}, "pair"),
                                          ({"pair": -1}, "pair")])
def test_positional_encoding_bad_values_give_a_message(kwargs, word):
    message = E.positional_encoding_figure(**kwargs)
    assert isinstance(message, str) and word in message


# ---------------------------------------------------------------- 05/06 attention maps


@pytest.fixture
def example():
    torch.manual_seed(0)
    maps = {"self": torch.rand(2, 4, 5, 5).softmax(-1), "cross": torch.rand(2, 4, 5, 7).softmax(-1)}
    labels = {"cross": (list("abcde"), list("ABCDEFG"))}
    return E.attention_example(maps, labels, title="example 0")


def test_attention_figure_one_head_and_all_heads(example):
    one = E.attention_figure(example, "cross", layer=1, head=2)
    assert n_images(one) == 1 and len(one.axes) == 2  # heatmap + colorbar
    image = one.axes[0].images[0].get_array()
    assert torch.allclose(torch.as_tensor(image.data), example["maps"]["cross"][1, 2])
    assert [t.get_text() for t in one.axes[0].get_xticklabels()] == list("ABCDEFG")
    grid = E.attention_figure(example, "self", layer=0, head="all")
    assert n_images(grid) == 4 and "self, layer 0" in grid._suptitle.get_text()


@pytest.mark.parametrize("kwargs, word", [({"kind": "encoder"}, "kind"), ({"layer": 2}, "layer"),
                                          ({"head": 4}, "head"), ({"head": -1}, "head"), ({"head": "x"}, "head")])
def test_attention_bad_values_give_a_message(example, kwargs, word):
    message = E.attention_figure(example, **{"kind": "self", "layer": 0, "head": 0, **kwargs})
    assert isinstance(message, str) and message.startswith(word)


def test_attention_example_rejects_bad_maps():
    with pytest.raises(ValueError, match="maps\\['self'\\]"):
        E.attention_example({"self": torch.rand(4, 5, 5)})
    with pytest.raises(TypeError, match="maps"):
        E.attention_example([torch.rand(1, 1, 2, 2)])


def test_attention_explorer_reports_a_failing_example(example):
    explorer = E.attention_explorer(lambda i: example if i == 0 else 1 / 0, n_examples=2)
    assert set(explorer.controls["kind"].options) == {"self", "cross"}
    assert explorer.controls["layer"].max == 1 and list(explorer.controls["head"].options) == ["all", 0, 1, 2, 3]
    assert isinstance(explorer.render(example_index=0, head=1), Figure)
    assert "ZeroDivisionError" in explorer.render(example_index=1)


# ---------------------------------------------------------------- 06 sampling playground


def fake_generate(prompt, temperature, top_k, top_p, max_new_tokens):
    noise = torch.randint(0, 26, (max_new_tokens,))
    return prompt + "".join(chr(97 + int(i)) for i in noise) + f"|{temperature}|{top_k}|{top_p}"


def test_sample_text_passes_the_knobs_and_is_seeded():
    text = E.sample_text(fake_generate, "ROMEO:", temperature=0.7, top_k=0, top_p=1.0, length=12, seed=3)
    assert text.startswith("ROMEO:") and text.endswith("|0.7|None|None") and len(text.split("|")[0]) == 6 + 12
    assert text == E.sample_text(fake_generate, "ROMEO:", temperature=0.7, top_k=0, top_p=1.0, length=12, seed=3)
    assert text != E.sample_text(fake_generate, "ROMEO:", temperature=0.7, top_k=0, top_p=1.0, length=12, seed=4)
    assert E.sample_text(fake_generate, "A", 1.0, top_k=5, top_p=0.9, length=3).endswith("|5|0.9")


@pytest.mark.parametrize("kwargs, word", [({"prompt": ""}, "prompt"), ({"temperature": 0}, "temperature"),
                                          ({"temperature": -0.5}, "temperature"), ({"top_k": -1}, "top_k"),
                                          ({"top_p": 0.0}, "top_p"), ({"top_p": 1.5}, "top_p"),
                                          ({"length": 0}, "length")])
def test_sample_text_bad_values_give_a_message(kwargs, word):
    message = E.sample_text(fake_generate, **{"prompt": "A", **kwargs})
    assert message.startswith(word)


def test_sample_text_reports_a_failing_generator():
    def unknown_character(prompt, **knobs):
        raise KeyError("character '€' is not in the vocabulary")

    assert "could not generate: KeyError" in E.sample_text(unknown_character, "€")


# ---------------------------------------------------------------- explorers: widget + static fallback


def test_explorers_display_widget_and_static_view():
    softmax = E.softmax_scaling_explorer()
    bundle = softmax._repr_mimebundle_()
    assert WIDGET in bundle and bundle["image/png"]  # live widget, and a PNG for front-ends without widgets
    before = bundle["image/png"]
    softmax.controls["d_k"].value = 1024
    assert softmax._repr_mimebundle_()["image/png"] != before
    positional = E.positional_encoding_explorer()
    positional.controls["d_model"].value = 8  # the pair slider follows d_model
    assert positional.controls["pair"].max == 3
    assert isinstance(positional.render(), Figure)
    playground = E.sampling_explorer(fake_generate)
    assert playground._repr_mimebundle_()["text/plain"].startswith("ROMEO:")
    assert "temperature" in playground.render(temperature=0.0)


def test_live_area_draws_only_once_a_front_end_shows_the_widget():
    softmax = E.softmax_scaling_explorer()
    softmax.controls["d_k"].value = 16  # set before display: nothing drawn yet
    assert not softmax.drawn and "image/png" not in str(softmax.output.get_state())
    assert softmax._repr_mimebundle_()["image/png"]  # the static view is there all the same
    assert not softmax.drawn  # displayed, but no front-end has shown the widget (e.g. nbconvert)
    softmax.widget._view_count = 1  # what JupyterLab sends when it attaches a view
    assert softmax.drawn
    softmax.controls["d_k"].value = 32  # after display every change redraws the live area
    assert softmax._last[0]["d_k"] == 32


def test_an_executed_notebook_stores_the_explorer_picture_once(tmp_path):
    """Headless execution (as `jupyter nbconvert --execute` does it) keeps one PNG: the output, not widget state."""
    import json
    import pathlib

    import nbformat
    from nbclient import NotebookClient

    root = pathlib.Path(__file__).resolve().parents[1]
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(f"import sys; sys.path.insert(0, {str(root)!r})\n"
                                                "from shared.explorers import softmax_scaling_explorer\n"
                                                "e = softmax_scaling_explorer(d_k=4)\n"
                                                "e.controls['n_keys'].value = 5\n"
                                                "e")]
    NotebookClient(notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": tmp_path}}).execute()
    [output] = notebook.cells[0].outputs
    assert WIDGET in output.data and output.data["image/png"]  # live widget + the static picture
    state = json.dumps(notebook.metadata["widgets"])
    assert E.Explorer.PLACEHOLDER in state  # the live area was saved holding its one line of text
    assert "image/png" not in state and "iVBOR" not in state  # and not a second copy of the picture


# ---------------------------------------------------------------- plugging in the course's models (untrained, tiny)


def test_attention_explorer_with_the_course_models():
    from shared.gpt import GPT, GPTConfig
    from shared.reversal import make_model, seq2seq_sample

    torch.manual_seed(0)
    model = make_model("encoder_decoder", d_model=16, n_heads=2, n_layers=2, d_ff=32).eval()
    sources = [[1, 2, 3], [4, 5, 6, 7, 8]]

    def reversal_example(i):
        src_in, tgt_in, _ = seq2seq_sample(sources[i])
        with torch.no_grad():
            model(torch.tensor([src_in]), torch.tensor([tgt_in]), need_weights=True)
        src_labels, tgt_labels = [str(d) for d in sources[i]], ["bos"] + [str(d) for d in sources[i][::-1]]
        return E.attention_example({kind: model.attention_maps(kind)[:, 0] for kind in ("encoder", "self", "cross")},
                                   {"encoder": (src_labels, src_labels), "self": (tgt_labels, tgt_labels),
                                    "cross": (tgt_labels, src_labels)})

    explorer = E.attention_explorer(reversal_example, n_examples=len(sources))
    fig = explorer.render(example_index=1, kind="cross", layer=1, head="all")
    assert n_images(fig) == 2 and fig.axes[0].images[0].get_array().shape == (6, 5)  # (T_tgt, T_src)

    gpt = GPT(GPTConfig(vocab_size=20, block_size=16, n_layers=2, n_heads=4, d_model=16)).eval()

    def gpt_example(i):
        tokens = torch.arange(i + 3)[None]  # (1, T)
        with torch.no_grad():
            gpt(tokens, need_weights=True)
        return E.attention_example({"self": gpt.attention_maps()[:, 0]})

    fig = E.attention_explorer(gpt_example, n_examples=3).render(example_index=2, head=3)
    assert n_images(fig) == 1 and fig.axes[0].images[0].get_array().shape == (5, 5)


def test_sampling_playground_with_the_course_gpt():
    from shared.generation.lm import generate
    from shared.gpt import GPT, GPTConfig
    from shared.shakespeare import CharTokenizer

    tokenizer = CharTokenizer.from_text("ROMEO: but soft, what light\n")
    torch.manual_seed(0)
    gpt = GPT(GPTConfig(vocab_size=tokenizer.vocab_size, block_size=16, n_layers=1, n_heads=2, d_model=16)).eval()

    def generate_text(prompt, temperature, top_k, top_p, max_new_tokens):
        ids = tokenizer.encode(prompt)[None]  # (1, T)
        return tokenizer.decode(generate(gpt, ids, max_new_tokens, temperature=temperature, top_k=top_k,
                                         top_p=top_p)[0])

    text = E.sample_text(generate_text, "ROMEO:", temperature=0.8, top_k=5, top_p=0.9, length=20)
    assert text.startswith("ROMEO:") and len(text) == 26
    assert E.sample_text(generate_text, "€", temperature=0.8).startswith("could not generate: ValueError")
