"""Each notebook's GPU size fits a 15 GB T4 (Colab's free GPU) with room to spare, checked without a GPU.

The settings are the notebooks' own: tests/notebook_code.py reads the `choose(..., cuda=...)` values, the model
definitions and the optimizer calls from each notebook's code cells, and the models are built on the meta device
(shapes, no memory). For every model a notebook trains at GPU size, one training step needs about

    memory = weights + gradients + optimizer state + activations, where
    weights      = 4 bytes x parameters (fp32; a tied matrix counted once)
    gradients    = 4 bytes x parameters
    optimizer    = AdamW/Adam: 2 fp32 moments, 8 bytes x parameters; Muon: 1 momentum, 4 bytes x each matrix it
                   steps (an optimizer group with `betas` keeps two moments per parameter, one without keeps one)
    activations  = every tensor autograd saves for the backward pass in one forward pass and loss at the GPU-size
                   batch (at the longest sequences the notebook trains on), parameters not counted again.

Attention is counted by the path the meta device takes, which keeps the (B, H, T, T) weights; CUDA's fused kernels
keep less, so this is an upper bound there. The test asserts memory <= 10 GB, two thirds of 15 GB: the last third is
for what the formula leaves out (the CUDA context, the activations' gradients during the backward pass, the
allocator's cache, evaluation batches). `pytest -s tests/test_gpu_size.py` prints the estimate of every model.
"""

from __future__ import annotations

import json
import pathlib
import types

import pytest
import torch

from tests.notebook_code import META, NotebookCode

NOTEBOOKS = pathlib.Path(__file__).resolve().parents[1] / "notebooks"
T4_BYTES = 15e9
LIMIT = 2 / 3 * T4_BYTES
SHAKESPEARE = types.SimpleNamespace(vocab_size=65)  # tiny Shakespeare's 65 characters (the CharTokenizer's vocabulary)


def estimate(model, optimizer, batch, loss_fn) -> dict:
    """The formula of the module docstring, in bytes, for one training step of `model` (built on the meta device)."""
    params = list({id(p): p for p in model.parameters()}.values())
    weights = sum(p.numel() * p.element_size() for p in params)
    gradients = sum(p.numel() * p.element_size() for p in params if p.requires_grad)
    state = sum((2 if "betas" in group else 1) * 4 * p.numel() for group in optimizer.param_groups
                for p in group["params"])
    ids, saved = {id(p) for p in params}, [0]

    def pack(t):
        if id(t) not in ids and id(t._base) not in ids:  # a weight (or a view of one) is not an activation
            saved[0] += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss, _ = loss_fn(model, batch)
    assert loss.requires_grad
    total = weights + gradients + state + saved[0]
    return dict(weights=weights, gradients=gradients, optimizer=state, activations=saved[0], total=total)


@pytest.fixture(autouse=True)
def values_unread(monkeypatch):
    """The course's value checks (ids in the vocabulary, positions inside the table) read a tensor's values, which meta
    tensors do not have: here a meta tensor reads as False (nothing wrong) and 0. Every shape check still runs."""
    as_bool, item = torch.Tensor.__bool__, torch.Tensor.item
    monkeypatch.setattr(torch.Tensor, "__bool__", lambda t: False if t.is_meta else as_bool(t))
    monkeypatch.setattr(torch.Tensor, "item", lambda t: 0 if t.is_meta else item(t))


def on_meta(batch):
    """A batch (a tensor, a tuple or a NamedTuple of tensors) moved to the meta device."""
    if isinstance(batch, torch.Tensor):
        return batch.to(META)
    moved = [on_meta(part) for part in batch]
    return type(batch)(*moved) if hasattr(batch, "_fields") else type(batch)(moved)


def lm_step(model, batch):
    from shared.training import lm_loss
    x, y = batch
    return lm_loss(model(x), y)


def text_batch(rows, block_size):
    tokens = torch.zeros(rows, block_size, dtype=torch.long, device=META)  # (B, T)
    return tokens, tokens


def reversal_batch(arch, rows, length):
    from shared.reversal import ReversalBatches
    with torch.device("cpu"):  # made from real lists, then only their shapes kept
        return on_meta(ReversalBatches(arch, rows, seed=0, min_len=length, max_len=length)(0))  # all `length` long


def notebook(name: str, **given) -> NotebookCode:
    return NotebookCode(next(NOTEBOOKS.glob(f"{name}_*.ipynb")), **given)


def steps_06():
    from shared.reversal import MAX_DIGITS, loss_for
    nb = notebook("06")
    sizes, gpt_sizes = nb.value("sizes"), nb.value("gpt_sizes")
    yield "encoder-decoder", nb.value("model"), nb.value("optimizer"), \
        reversal_batch("encoder_decoder", sizes["batch_size"], MAX_DIGITS), loss_for("encoder_decoder")
    yield "decoder-only", nb.value("gpt"), nb.value("gpt_optimizer"), \
        reversal_batch("decoder_only", gpt_sizes["batch_size"], MAX_DIGITS), loss_for("decoder_only")


def steps_07():
    from shared.reversal import MAX_DIGITS, loss_for
    nb = notebook("07")
    batch = nb.value("BATCH")
    model = nb.define("new_model")()
    yield "encoder-decoder", model, torch.optim.Adam(model.parameters()), \
        reversal_batch("encoder_decoder", batch, MAX_DIGITS), loss_for("encoder_decoder")
    stack = nb.define("Stack")(6, norm_first=False)  # the deepest stack of the stability sweep
    yield "6-block stack", stack, torch.optim.Adam(stack.parameters()), \
        reversal_batch("decoder_only", batch, MAX_DIGITS), nb.define("lm_batch_loss")


def steps_08():
    nb = notebook("08", tokenizer=SHAKESPEARE)
    settings = nb.value("settings")
    nb.value("config")
    yield "GPT", nb.value("model"), nb.value("optimizer"), \
        text_batch(settings["batch_size"], settings["block_size"]), lm_step


def steps_09():
    from shared.lengthgen import RECIPE, SCHEMES, TRAIN_LENGTHS, make_scheme_model
    from shared.reversal import loss_for
    recipe = {**RECIPE, **notebook("09").value("RECIPE")}  # as shared.lengthgen.train_scheme merges them
    for scheme, (_, archs) in SCHEMES.items():
        for arch in archs:
            model = make_scheme_model(scheme, arch, recipe["d_model"], recipe["n_heads"], recipe["n_layers"]).to(META)
            yield f"{scheme}/{arch}", model, torch.optim.AdamW(model.parameters()), \
                reversal_batch(arch, recipe["batch_size"], TRAIN_LENGTHS[1]), loss_for(arch)


def steps_10():
    nb = notebook("10", tokenizer=SHAKESPEARE)
    nb.value("MODERN"), nb.value("OPTIONS"), nb.value("LR")
    settings, configs = nb.value("settings"), nb.value("CONFIGS")
    make_config, make_optimizer = nb.define("make_config"), nb.define("make_optimizer")
    for name, options in configs.items():
        for optimizer in ("adamw", "muon"):
            from shared.gpt import GPT
            model = GPT(make_config(options))
            yield f"{name}, {optimizer}", model, make_optimizer(model, optimizer), \
                text_batch(settings["batch_size"], settings["block_size"]), lm_step


def steps_11():
    nb = notebook("11", tokenizer=SHAKESPEARE)
    config = nb.value("config")
    rows = nb.define("short_run").__defaults__[3]  # short_run(micro_batches, precision, steps, rows, ...)
    assert rows == 16
    from shared.gpt import GPT
    from shared.training import make_adamw
    model = GPT(config)
    yield "GPT", model, make_adamw(model, lr=3e-3), text_batch(rows, config.block_size), lm_step


def steps_12():
    from shared.addition import MAX_DIGITS, AdditionBatches, loss_for
    nb = notebook("12")
    fmt, rows = nb.value("reference_format"), nb.call_argument("AdditionBatches", 1)
    model = nb.define("new_adder")()
    with torch.device("cpu"):
        batch = on_meta(AdditionBatches("decoder_only", rows, min_digits=MAX_DIGITS, **fmt)(0))  # the longest ones
    yield "reference adder", model, torch.optim.AdamW(model.parameters()), batch, loss_for("decoder_only")


STEPS = {"06": steps_06, "07": steps_07, "08": steps_08, "09": steps_09, "10": steps_10, "11": steps_11,
         "12": steps_12}


@pytest.mark.parametrize("chapter", sorted(STEPS))
def test_gpu_size_fits_a_t4_with_room_to_spare(chapter):
    with torch.device(META):
        estimates = {label: estimate(model, optimizer, batch, loss_fn)
                     for label, model, optimizer, batch, loss_fn in STEPS[chapter]()}
    assert estimates
    for label, e in estimates.items():
        print(f"{chapter} {label:28s} " + " ".join(f"{k} {v / 1e9:.3f}" for k, v in e.items()) + " GB")
        assert e["total"] <= LIMIT, (f"notebook {chapter}, {label}: one GPU-size training step needs about "
                                     f"{e['total'] / 1e9:.1f} GB, over {LIMIT / 1e9:.0f} GB (2/3 of a T4): {e}")


def test_the_meta_count_equals_the_count_on_real_tensors():
    """The meta device saves for backward what the CPU saves for the same step (dropout masks included)."""
    from shared.gpt import GPT, GPTConfig
    from shared.training import make_adamw

    config = GPTConfig(vocab_size=65, block_size=32, n_layers=2, n_heads=4, d_model=64, dropout=0.1)
    estimates = {}
    for device in ("cpu", META):
        with torch.device(device):
            torch.manual_seed(0)
            model = GPT(config)
            tokens = torch.zeros(3, 32, dtype=torch.long)  # (B, T)
            estimates[str(device)] = estimate(model, make_adamw(model, lr=1e-3), (tokens, tokens), lm_step)
    assert estimates["cpu"] == estimates["meta"]
    n = model.num_parameters()
    assert estimates["meta"]["weights"] == estimates["meta"]["gradients"] == 4 * n
    assert estimates["meta"]["optimizer"] == 8 * n  # AdamW: two moments per parameter
    assert estimates["meta"]["activations"] > 3 * 32 * 64 * 4 * 2 * 2  # more than two (B, T, d_model) per block


def test_the_reader_takes_the_gpu_size_and_names_a_missing_setting(tmp_path):
    cells = [("code", "from shared.runtime import choose, fast_mode, setup\ndevice = setup(seed=0)"),
             ("code", "%matplotlib inline\nWIDTH, DEPTH = 8, 2\nsizes = choose(fast=1, cpu=2, cuda=dict(d=WIDTH * 4))"),
             ("code", "%%writefile x.py\nsizes = 'not this notebook'"),
             ("code", "def make(n, rows=16):\n    return [n] * DEPTH")]
    path = tmp_path / "99_example.ipynb"
    path.write_text(json.dumps({"cells": [{"cell_type": kind, "source": source, "metadata": {}}
                                          for kind, source in cells]}))
    nb = NotebookCode(path)
    assert nb.value("DEPTH") == 2 and nb.namespace["WIDTH"] == 8
    assert nb.value("sizes") == {"d": 32}  # choose's cuda= value, not the setup cell's choose
    assert nb.namespace["device"] == META
    assert nb.define("make")(5) == [5, 5] and nb.namespace["make"].__defaults__ == (16,)
    with pytest.raises(AssertionError, match="99_example.ipynb has no top-level assignment to 'steps' any more"):
        nb.value("steps")
    with pytest.raises(AssertionError, match="no definition of 'train'"):
        nb.define("train")
