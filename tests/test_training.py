import math

import pytest
import torch
from torch import nn
from tqdm import tqdm as text_tqdm
from tqdm.notebook import tqdm_notebook

import shared.training
from shared.gpt import GPT, GPTConfig
from shared.history import History
from shared.runtime import choose, fast_mode, get_device, seed_everything
from shared.training import evaluate, lm_loss, make_adamw, noam_schedule, train, warmup_cosine


def test_lm_loss_ignores_masked_targets():
    logits = torch.randn(2, 3, 5)
    targets = torch.tensor([[1, 2, -100], [-100, 4, 0]])
    loss, n = lm_loss(logits, targets)
    keep = targets != -100
    expected = nn.functional.cross_entropy(logits[keep], targets[keep])
    assert n == 4 and loss.item() == pytest.approx(expected.item())
    with pytest.raises(ValueError, match="disagree"):
        lm_loss(logits, targets[:, :2])
    with pytest.raises(TypeError, match="logits must be a floating-point tensor"):
        lm_loss(logits.long(), targets)
    with pytest.raises(TypeError, match="targets must be an integer tensor of class ids"):
        lm_loss(logits, targets.float())  # torch: "expected target dtype to be Long or Byte"
    with pytest.raises(IndexError, match=r"targets must hold ids in 0\.\.4 .*ignore_index=-100"):
        lm_loss(logits, torch.tensor([[1, 2, 7], [0, 0, 0]]))  # torch: "Target 7 is out of bounds."


def test_schedules():
    noam = noam_schedule(d_model=512, warmup=4000)
    peak = max(noam(s, 0.0) for s in range(0, 8000, 50))
    assert noam(3999, 0.0) == pytest.approx(peak, rel=1e-3) and noam(0, 0.0) < noam(100, 0.0)
    sched = warmup_cosine(warmup=10, min_ratio=0.1)
    assert sched(0, 0.0) == pytest.approx(0.1) and sched(9, 0.05) == pytest.approx(1.0, abs=0.01)
    assert sched(505, 0.505) == pytest.approx(0.55) and sched(1000, 1.0) == pytest.approx(0.1)


def test_adamw_decays_only_linear_weights():
    model = GPT(GPTConfig(vocab_size=11, block_size=8, n_layers=1, n_heads=2, d_model=8))
    decay, no_decay = make_adamw(model, lr=1e-3).param_groups
    decayed = {id(p) for p in decay["params"]}
    assert id(model.tok_emb.weight) not in decayed and id(model.pos_emb.embedding.weight) not in decayed
    assert id(model.blocks[0].attn.w_q.weight) in decayed and id(model.blocks[0].attn.w_q.bias) not in decayed
    assert id(model.norm.weight) not in decayed
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(model.parameters()))


def test_train_learns_and_logs_token_weighted_history():
    seed_everything(0)
    model = nn.Sequential(nn.Embedding(4, 16), nn.Linear(16, 4))
    data = torch.tensor([[0, 1, 2, 3, 0, 1, 2, 3]])

    def loss_fn(m, batch):
        return lm_loss(m(batch[:, :-1]), batch[:, 1:])

    history = train(model, torch.optim.Adam(model.parameters(), 0.05), lambda step: data, loss_fn,
                    max_steps=60, log_every=5, schedule=warmup_cosine(5), progress=False,
                    eval_fn=lambda m: loss_fn(m, data)[0], eval_every=30)
    assert history.step == list(range(5, 61, 5)) and history.tokens[-1] == 60 * 7 and history.next_step == 60
    assert history.loss[0] > 1.0 and history.loss[-1] < 0.05
    assert history.val_loss[-1] < 0.05 and history.val_step == [30, 60]
    assert history.lr[-1] == pytest.approx(0.05 * 0.1, rel=0.05)


def test_train_stops_at_max_seconds():
    model = nn.Linear(2, 2)
    history = train(model, torch.optim.SGD(model.parameters(), 0.1), lambda s: torch.randn(4, 2),
                    lambda m, b: (m(b).pow(2).mean(), 4), max_steps=10**6, max_seconds=0.2, progress=False)
    assert 0 < history.next_step < 10**6 and history.seconds[-1] >= 0.2


def test_train_rejects_bad_arguments():
    model = nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), 0.1)
    with pytest.raises(ValueError, match="max_steps must be a positive int"):
        train(model, opt, None, None, max_steps=0)
    with pytest.raises(ValueError, match="log_every"):
        train(model, opt, None, None, max_steps=5, log_every=3, checkpoint_every=10)


def test_runtime_helpers(monkeypatch):
    monkeypatch.setenv("COURSE_SIZE", "fast")
    assert fast_mode() and choose(fast=1, cpu=2, cuda=3) == 1
    monkeypatch.delenv("COURSE_SIZE", raising=False)
    assert not fast_mode() and choose(fast=1, cpu=2, cuda=3, device="cpu") == 2
    assert choose(fast=1, cpu=2, cuda=3, device="cuda") == 3
    assert get_device("cpu").type == "cpu" and get_device().type in {"cpu", "cuda", "mps"}
    seed_everything(3)
    a = torch.rand(3)
    seed_everything(3)
    assert torch.equal(a, torch.rand(3))
    with pytest.raises(TypeError, match="seed must be an int"):
        seed_everything(1.5)
    assert math.isclose(warmup_cosine(0)(0, 0.0), 1.0)
    assert History().next_step == 0


def test_train_logs_and_evaluates_on_different_intervals():
    model = nn.Linear(2, 2)
    history = train(model, torch.optim.SGD(model.parameters(), 0.1), lambda s: torch.randn(4, 2),
                    lambda m, b: (m(b).pow(2).mean(), 4), max_steps=20, log_every=10, eval_every=5,
                    eval_fn=lambda m: 0.0)  # progress bar on: its postfix must not read an empty loss log
    assert history.step == [10, 20] and history.val_step == [5, 10, 15, 20]


def test_warmup_cosine_reaches_peak_then_decays_over_the_remaining_steps():
    steps, warmup = 100, 10
    sched = warmup_cosine(warmup, min_ratio=0.2)
    values = [sched(s, s / steps) for s in range(steps)]
    assert max(values) == pytest.approx(1.0) and values.index(max(values)) == warmup - 1
    assert values[warmup] == pytest.approx(1.0)  # the cosine starts at 1 right after warm-up
    assert sched(55, 0.55) == pytest.approx(0.2 + 0.8 * 0.5)  # halfway through the 90 steps after warm-up
    assert all(a >= b for a, b in zip(values[warmup:], values[warmup + 1:]))
    model = nn.Linear(2, 2)  # the same through train(): the logged lr touches the base lr once
    history = train(model, torch.optim.SGD(model.parameters(), 0.5), lambda s: torch.randn(4, 2),
                    lambda m, b: (m(b).pow(2).mean(), 4), max_steps=steps, log_every=1,
                    schedule=sched, progress=False)
    assert max(history.lr) == pytest.approx(0.5) and history.lr[-1] == pytest.approx(0.5 * 0.2, rel=0.01)


def test_noam_schedule_rejects_bad_sizes():
    with pytest.raises(ValueError, match="warmup must be a positive int"):
        noam_schedule(d_model=512, warmup=0)
    with pytest.raises(ValueError, match="d_model must be a positive int"):
        noam_schedule(d_model=0, warmup=4000)
    with pytest.raises(ValueError, match="warmup"):
        noam_schedule(d_model=512, warmup=2.5)


def test_train_reads_values_back_from_the_device_only_when_logging(monkeypatch):
    seed_everything(0)
    model = nn.Sequential(nn.Embedding(4, 8), nn.Linear(8, 4))
    data = torch.tensor([[0, 1, 2, 3, 0, 1, 2, 3]])
    reads = []
    for name in ("cpu", "item", "__int__", "__float__", "tolist", "__bool__"):  # every way to copy a value to the host
        original = getattr(torch.Tensor, name)

        def counted(self, *args, _original=original, _name=name, **kwargs):
            reads.append(_name)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counted)
    history = train(model, torch.optim.SGD(model.parameters(), 0.1), lambda s: data,
                    lambda m, b: lm_loss(m(b[:, :-1]), b[:, 1:]), max_steps=40, log_every=20, progress=False)
    assert history.step == [20, 40] and history.tokens == [20 * 7, 40 * 7]
    per_step = [r for r in reads if r == "__bool__"]  # fp32: is the loss finite? (before each update)
    assert len(per_step) == 40 and len(reads) - len(per_step) <= 4 * len(history.step), reads  # the rest: logging


def test_lm_loss_count_stays_on_the_device():
    _, n = lm_loss(torch.randn(1, 3, 5), torch.tensor([[1, -100, 2]]))
    assert isinstance(n, torch.Tensor) and n.dim() == 0 and int(n) == 2


def test_train_records_gradient_norms_before_clipping():
    seed_everything(0)
    model = nn.Linear(4, 1)
    batch = torch.randn(16, 4) * 100
    opt = torch.optim.SGD(model.parameters(), 0.0)  # lr 0: the gradient stays the same every step

    def loss_fn(m, b):
        return m(b).pow(2).mean(), 16

    history = train(model, opt, lambda s: batch, loss_fn, max_steps=4, log_every=2, grad_clip=1.0, progress=False)
    model.zero_grad()
    loss_fn(model, batch)[0].backward()
    expected = torch.cat([p.grad.flatten() for p in model.parameters()]).norm().item()
    assert expected > 1.0 and history.grad_norm == pytest.approx([expected, expected], rel=1e-5)


@pytest.mark.parametrize("bar_class", [text_tqdm, tqdm_notebook])
def test_progress_bar_stopped_by_time_budget_ends_finished(monkeypatch, bar_class, capsys):
    bars = []

    class Recorded(bar_class):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            bars.append(self)

    monkeypatch.setattr(shared.training, "tqdm", Recorded)
    model = nn.Linear(2, 2)
    history = train(model, torch.optim.SGD(model.parameters(), 0.1), lambda s: torch.randn(4, 2),
                    lambda m, b: (m(b).pow(2).mean(), 4), max_steps=10**6, max_seconds=0.1, desc="budget")
    (bar,) = bars
    assert 0 < history.next_step < 10**6 and bar.n == bar.total == history.next_step
    if bar_class is tqdm_notebook:  # the widget: full, green, and its stored text shows the real count
        widget = bar.container.children[1]
        assert widget.max == widget.value == history.next_step and widget.bar_style == "success"
        assert f"{history.next_step}/{history.next_step}" in repr(bar.container)
    else:
        assert "100%|" in capsys.readouterr().err


def test_lm_loss_label_smoothing_matches_the_smoothed_target_distribution():
    logits, targets = torch.randn(2, 3, 5), torch.tensor([[1, 2, -100], [0, 4, 3]])
    loss, _ = lm_loss(logits, targets, label_smoothing=0.1)
    keep = targets != -100
    smoothed = torch.full((int(keep.sum()), 5), 0.1 / 5).scatter_add_(
        1, targets[keep][:, None], torch.full((int(keep.sum()), 1), 0.9))
    expected = -(smoothed * logits[keep].log_softmax(-1)).sum(-1).mean()
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    with pytest.raises(ValueError, match="label_smoothing"):
        lm_loss(logits, targets, label_smoothing=1.0)


def test_a_batch_whose_targets_are_all_ignored_leaves_the_logged_loss_a_mean_over_real_tokens():
    seed_everything(0)
    model = nn.Sequential(nn.Embedding(4, 8), nn.Linear(8, 4))
    x, y = torch.tensor([[0, 1, 2, 3, 0, 1, 2]]), torch.tensor([[1, 2, 3, 0, 1, 2, 3]])
    empty = torch.full_like(y, -100)  # a batch with no target to score: its mean loss is NaN

    def batch_fn(step):
        return x, (empty if step in (1, 4, 5) else y)

    history = train(model, torch.optim.SGD(model.parameters(), 0.0), batch_fn,  # lr 0: the same loss every step
                    lambda m, b: lm_loss(m(b[0]), b[1]), max_steps=6, log_every=2, progress=False)
    expected = lm_loss(model(x), y)[0].item()
    assert history.tokens == [7, 21, 21]
    assert history.loss[:2] == pytest.approx([expected, expected], rel=1e-6)  # the mean over batches with tokens
    assert math.isnan(history.loss[2])  # steps 4-5 had no tokens at all: there is no mean to log


@pytest.mark.parametrize("warmup, min_ratio", [(2.5, 0.1), (math.nan, 0.1), (True, 0.1), (-1, 0.1), ("10", 0.1),
                                               (10, math.nan), (10, True), (10, -0.1), (10, 1.5), (10, None)])
def test_warmup_cosine_rejects_what_is_not_a_step_count_or_a_ratio(warmup, min_ratio):
    name = "warmup" if not isinstance(warmup, int) or isinstance(warmup, bool) or warmup < 0 else "min_ratio"
    with pytest.raises(ValueError, match=name):
        warmup_cosine(warmup, min_ratio)


@pytest.mark.parametrize("name, bad", [
    ("max_seconds", math.nan), ("max_seconds", -1.0), ("max_seconds", 0), ("max_seconds", math.inf),
    ("max_seconds", True), ("log_every", 0), ("log_every", -5), ("log_every", 2.5), ("log_every", True),
    ("eval_every", -1), ("eval_every", 1.5), ("eval_every", True), ("eval_every", None),
    ("checkpoint_every", -2), ("checkpoint_every", 2.0), ("checkpoint_every", True), ("micro_batches", 0),
])
def test_train_refuses_bad_intervals_and_budgets_before_the_first_step(name, bad):
    model, drawn = nn.Linear(2, 2), []
    with pytest.raises(ValueError, match=name):
        train(model, torch.optim.SGD(model.parameters(), 0.1), lambda s: drawn.append(s) or torch.randn(4, 2),
              lambda m, b: (m(b).pow(2).mean(), 4), max_steps=3, progress=False, **{name: bad})
    assert drawn == []  # refused before any batch was drawn


@pytest.mark.parametrize("training", [True, False])
def test_evaluate_runs_in_eval_mode_and_gives_the_model_back_its_mode(training):
    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5)).train(training)
    seen = []

    def eval_fn(m):
        seen.append((m.training, m[1].training, torch.is_grad_enabled()))
        return 1.5

    assert evaluate(model, eval_fn) == 1.5 and seen == [(False, False, False)]
    assert model.training == training and model[1].training == training

    def broken(m):
        raise RuntimeError("eval failed")

    with pytest.raises(RuntimeError, match="eval failed"):
        evaluate(model, broken)
    assert model.training == training and model[1].training == training  # restored on error too
