"""The notebooks' GPU size fits a 15 GB T4 (Colab's free GPU) with room to spare, checked without a GPU.

What is checked: one training step of every model that notebooks 06-12 train at GPU size (08: the GPT and the three
models of its comparison; 07: the deepest Post-LN and Pre-LN stacks), and notebook 01's cells with GPU sizes (every
cell that calls choose(..., cuda=...), run on the meta device with all it allocates summed, frees not subtracted).
Not checked: notebook 02's timing cell (its cuda= lengths reach T = 2,048, about 1.1 GB per (8, 8, T, T) tensor),
notebook 13's tokenizer sizes, evaluation and sampling cells, and notebook 11's torchrun processes. The other
cuda= values of notebooks 04, 05, 14 and 15 equal their CPU size.

The settings are the notebooks' own: tests/notebook_code.py reads the `choose(..., cuda=...)` values, the model
definitions and the optimizer calls from each notebook's code cells (and fails where a notebook assigns a setting
it reads again later), and the models are built on the meta device (shapes, no memory). For every model a notebook
trains at GPU size, one training step needs about

    memory = weights + gradients + optimizer state + activations, where
    weights      = 4 bytes x parameters (fp32; a tied matrix counted once)
    gradients    = 4 bytes x parameters
    optimizer    = AdamW/Adam: 2 fp32 moments, 8 bytes x parameters; Muon: 1 momentum, 4 bytes x each matrix it
                   steps (an optimizer group with `betas` keeps two moments per parameter, one without keeps one)
    activations  = every tensor autograd saves for the backward pass in one forward pass and loss at the GPU-size
                   batch (at the longest sequences the notebook trains on), parameters not counted again.

Attention is counted by the path the meta device takes, which keeps the (B, H, T, T) weights; CUDA's fused kernels
keep less, so this is an upper bound there. Against a real CPU step on that path (torch.profiler's peak) the formula
is an upper bound within 1.5x (measured 1.04-1.42; test_the_estimate_bounds_the_peak_measured_on_a_real_step). The
test asserts memory <= 10 GB, two thirds of 15 GB: the last third is for what the formula leaves out (the CUDA
context, the activations' gradients during the backward pass, the allocator's cache, evaluation batches). `pytest -s
tests/test_gpu_size.py` prints the estimate of every model.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import io
import json
import pathlib
import types

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

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
    Stack, lm_batch_loss = nb.define("Stack"), nb.define("lm_batch_loss")
    depth = max(nb.evaluate(call.args[0]) for call in nb.calls("Stack"))  # the deepest stack the notebook trains
    for norm_first in (False, True):  # the stability sweep trains both
        stack, kind = Stack(depth, norm_first), "Pre" if norm_first else "Post"
        yield f"{depth}-block {kind}-LN stack", stack, torch.optim.Adam(stack.parameters()), \
            reversal_batch("decoder_only", batch, MAX_DIGITS), lm_batch_loss


def steps_08():
    from shared.training import make_adamw
    nb = notebook("08", tokenizer=SHAKESPEARE)
    settings = nb.value("settings")
    nb.value("config")
    yield "GPT", nb.value("model"), nb.value("optimizer"), \
        text_batch(settings["batch_size"], settings["block_size"]), lm_step
    # the comparison: two 4-layer GPTs and a 2 + 2-layer encoder-decoder, trained on windows of P + C characters
    nb.value("V"), nb.value("P"), nb.value("BOS"), nb.value("cmp_steps")
    for name in ("split_window", "encdec_loss", "gpt_loss_all", "gpt_loss_continuation"):
        nb.define(name)
    rows, width = nb.call_argument("block_batches", "batch_size"), nb.namespace["P"] + nb.namespace["C"]
    for name, (_, build, loss) in nb.value("candidates").items():
        model = build()
        yield name, model, make_adamw(model, lr=1e-3), torch.zeros(rows, width, dtype=torch.long), loss


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
    short_run = nb.define("short_run")
    position = list(inspect.signature(short_run).parameters).index("rows")
    rows = max([inspect.signature(short_run).parameters["rows"].default]  # the default, or what a call passes
               + [nb.evaluate(call.args[position]) for call in nb.calls("short_run") if len(call.args) > position]
               + [nb.evaluate(k.value) for call in nb.calls("short_run") for k in call.keywords if k.arg == "rows"])
    from shared.gpt import GPT
    from shared.training import make_adamw
    model = GPT(config)
    yield f"GPT, {rows} rows", model, make_adamw(model, lr=3e-3), text_batch(rows, config.block_size), lm_step


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


class Allocations(TorchDispatchMode):
    """Counts the bytes of every storage an operation creates, never subtracting a free: an upper bound on the
    peak memory of the code run under it (views share their base's storage and are not counted again)."""

    def __init__(self):
        super().__init__()
        self.bytes, self.storages = 0, {}  # the storages are kept, so that no address is reused and missed

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.untyped_storage()._cdata not in self.storages:
                self.storages[t.untyped_storage()._cdata] = t.untyped_storage()
                self.bytes += t.untyped_storage().nbytes()
        return out


def test_notebook_01s_gpu_size_cells_fit_a_t4_with_room_to_spare():
    """Notebook 01 trains nothing, but two cells sample large tensors (cuda=: 50,000 rows of 16 keys up to 1,024 wide).
    Every cell of it that calls choose() runs here on the meta device, in order, and all it allocates is summed."""
    path = next(NOTEBOOKS.glob("01_*.ipynb"))
    namespace = NotebookCode(path).namespace
    sources = ["".join(c["source"]) for c in json.loads(path.read_text(encoding="utf-8"))["cells"]
               if c["cell_type"] == "code"]
    sized = [s for s in sources if any(isinstance(n, ast.Call) and getattr(n.func, "id", None) == "choose"
                                       and any(k.arg == "cuda" for k in n.keywords) for n in ast.walk(ast.parse(s)))]
    assert len(sized) >= 2, "notebook 01's cells with GPU sizes are gone: update this test"
    for source in sized:
        with Allocations() as counted, contextlib.redirect_stdout(io.StringIO()):
            exec(compile(source, str(path), "exec"), namespace)
        first = source.strip().splitlines()[0]
        print(f"01 {first[:60]:60s} at most {counted.bytes / 1e9:.3f} GB")
        assert counted.bytes > 1e9  # the cuda= sizes were read: at CPU size these cells take far less
        assert counted.bytes <= LIMIT, f"notebook 01, cell {first!r}: up to {counted.bytes / 1e9:.1f} GB at GPU size"


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


MEASURED = [(8, 64, 64, 0.1), (8, 64, 64, 0.0), (16, 256, 128, 0.1)]  # (B, T, d_model, dropout), 2 layers, 4 heads


@pytest.mark.parametrize("rows, block, width, dropout", MEASURED)
def test_the_estimate_bounds_the_peak_measured_on_a_real_step(rows, block, width, dropout):
    """The formula against an independent number: the peak bytes torch.profiler counts while a real CPU training step
    runs (build, forward, loss, backward, AdamW step), attention forced onto the path the meta device takes (PyTorch's
    math kernel, which keeps the (B, H, T, T) weights). The estimate must be an upper bound, and not a loose one:
    at most 1.5 x the peak (measured 1.04-1.16 with dropout, 1.42 without, where a tensor saved by two backward
    functions counts twice)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from shared.debug.memory import peak_cpu_memory
    from shared.gpt import GPT, GPTConfig
    from shared.training import make_adamw

    config = GPTConfig(vocab_size=65, block_size=block, n_layers=2, n_heads=4, d_model=width, dropout=dropout)
    with torch.device(META):
        model = GPT(config)
        tokens = torch.zeros(rows, block, dtype=torch.long)  # (B, T)
        e = estimate(model, make_adamw(model, lr=1e-3), (tokens, tokens), lm_step)

    def step():
        torch.manual_seed(0)
        model = GPT(config)
        optimizer = make_adamw(model, lr=1e-3)
        tokens = torch.randint(0, config.vocab_size, (rows, block))  # (B, T)
        loss, _ = lm_step(model, (tokens, tokens))
        loss.backward()
        optimizer.step()

    with sdpa_kernel(SDPBackend.MATH):
        peak = peak_cpu_memory(step).peak
    print(f"B{rows} T{block} d{width} dropout {dropout}: estimate {e['total'] / 1e6:.2f} MB, "
          f"measured peak {peak / 1e6:.2f} MB, ratio {e['total'] / peak:.3f}")
    assert peak <= e["total"] <= 1.5 * peak, (e, peak)


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


def test_the_reader_refuses_a_setting_the_notebook_assigns_again(tmp_path):
    cells = ["from shared.runtime import choose",
             "settings = choose(fast=dict(batch_size=4), cpu=dict(batch_size=8), cuda=dict(batch_size=64))\nrows = 2",
             "def train(settings, rows=3):\n    settings = dict(settings)\n    return [rows for rows in ()]",
             "loader = make(settings, 8, rows=16)",
             "settings = dict(settings, batch_size=1024)  # a later override\nfor rows in (4, 8):\n    pass"]
    path = tmp_path / "99_example.ipynb"
    path.write_text(json.dumps({"cells": [{"cell_type": "code", "source": s, "metadata": {}} for s in cells]}))
    nb = NotebookCode(path)
    with pytest.raises(AssertionError, match=r"99_example.ipynb assigns 'settings' again .*"
                                             r"settings = dict\(settings, batch_size=1024\)"):
        nb.value("settings")
    with pytest.raises(AssertionError, match="assigns 'rows' again .*for rows in"):
        nb.value("rows")
    assert nb.define("train").__defaults__ == (3,)  # names local to a function are not the notebook's
    assert nb.call_argument("make", "rows") == 16 and nb.call_argument("make", 1) == 8  # by keyword, by position
    assert [call.func.id for call in nb.calls("make")] == ["make"]
