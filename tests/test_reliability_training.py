"""train() and its helpers refuse nonsense and resume exactly (issue 24): RNG at train()'s end, learning-rate
factors, non-finite losses, make_adamw's numbers, a loss_fn's return value, micro-batches weighted by tokens."""

import math
from dataclasses import dataclass

import pytest
import torch
from torch import nn

from shared.checkpoint import load_checkpoint, restore_model, restore_training, save_checkpoint
from shared.distributed import Precision, backward_micro_batches
from shared.generation.lm import generate
from shared.gpt import GPT, GPTConfig
from shared.shakespeare import block_batches
from shared.training import lm_loss, make_adamw, train

DROPOUT = GPTConfig(vocab_size=11, block_size=8, n_layers=1, n_heads=2, d_model=16, dropout=0.2)


def gpt_run(model, optimizer, max_steps, history=None):
    batches = block_batches(torch.randint(11, (200,), generator=torch.Generator().manual_seed(0)), 8, 4, seed=0)
    return train(model, optimizer, batches, lambda m, b: lm_loss(m(b[0]), b[1]), max_steps=max_steps,
                 log_every=5, history=history, progress=False)


def fresh_gpt():
    torch.manual_seed(0)
    model = GPT(DROPOUT)
    return model, make_adamw(model, 1e-2)


def test_resume_is_exact_after_sampling_between_train_and_the_save(tmp_path):
    full, full_optimizer = fresh_gpt()
    gpt_run(full, full_optimizer, 20)  # 20 steps in one go: dropout draws from the RNG every step

    model, optimizer = fresh_gpt()
    history = gpt_run(model, optimizer, 10)
    generate(model, torch.zeros(1, 1, dtype=torch.long), 5)  # sampling draws from the same RNG, after train()
    save_checkpoint(tmp_path / "run.pt", model, DROPOUT, optimizer=optimizer, history=history)
    state = load_checkpoint(tmp_path / "run.pt")
    torch.manual_seed(123)  # a new process starts from another random state
    resumed = restore_model(state, GPT(DROPOUT), DROPOUT)
    resumed_optimizer = make_adamw(resumed, 1e-2)
    gpt_run(resumed, resumed_optimizer, 20, history=restore_training(state, resumed_optimizer))
    assert all(torch.equal(a, b) for a, b in zip(resumed.state_dict().values(), full.state_dict().values()))


@dataclass
class LinearConfig:
    d_in: int = 4
    d_out: int = 2


def fresh_linear():
    torch.manual_seed(0)
    return nn.Linear(4, 2)


def square_loss(model, batch):
    return model(batch).float().pow(2).mean(), 8


def linear_run(model, drawn=None, *, schedule=None, loss_fn=square_loss, precision="fp32", max_steps=4,
               history=None):
    """A few SGD steps of `model` on seeded random batches; `drawn` collects the steps whose batch was drawn."""
    drawn = [] if drawn is None else drawn

    def batch_fn(step):
        drawn.append(step)
        return torch.randn(8, 4, generator=torch.Generator().manual_seed(step))

    train(model, torch.optim.SGD(model.parameters(), 0.1), batch_fn, loss_fn, max_steps=max_steps,
          schedule=schedule, precision=precision, history=history, progress=False)
    return model


def same_weights(a, b):
    return all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


@pytest.mark.parametrize("factor", [math.nan, -1.0, math.inf, "1", None])
def test_a_schedule_factor_that_is_not_finite_and_non_negative_stops_before_it_touches_the_weights(factor):
    model, drawn = fresh_linear(), []
    with pytest.raises(ValueError, match=r"schedule\(2, 0\.5\) must be a finite number >= 0.*at step 2"):
        linear_run(model, drawn, schedule=lambda step, frac: factor if step == 2 else 1.0)
    assert drawn == [0, 1] and same_weights(model, linear_run(fresh_linear(), max_steps=2))  # steps 0-1 only


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_non_finite_loss_stops_training_before_the_optimizer_step(precision):
    def loss_fn(m, batch):
        loss, n = square_loss(m, batch)
        return (loss * math.nan if len(drawn) == 3 else loss), n  # the loss of step 2 (the 3rd batch) is NaN

    model, drawn = fresh_linear(), []
    with pytest.raises(FloatingPointError, match="loss at step 2 is nan"):
        linear_run(model, drawn, loss_fn=loss_fn, precision=precision, max_steps=4)
    assert drawn == [0, 1, 2] and all(torch.isfinite(p).all() for p in model.parameters())
    assert same_weights(model, linear_run(fresh_linear(), precision=precision, max_steps=2))  # the weights after 2


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("grad_clip", [1.0, None])
def test_a_finite_loss_with_a_non_finite_gradient_stops_before_the_step_and_keeps_the_checkpoint(
        precision, grad_clip, tmp_path):
    def loss_fn(m, batch):  # sqrt at 0 has an infinite slope: a finite loss, a NaN gradient
        out = m(batch).float()
        loss = out.pow(2).mean() + ((out - out.detach()).abs().sqrt().mean() if len(drawn) == 3 else 0.0)
        return loss, 8

    model, drawn = fresh_linear(), []
    path = tmp_path / "run.pt"
    save = lambda history: save_checkpoint(path, model, LinearConfig(), history=history)  # noqa: E731
    with pytest.raises(FloatingPointError, match="gradient norm at step 2 is nan although the loss is finite"):
        train(model, torch.optim.SGD(model.parameters(), 0.1), lambda step: drawn.append(step) or torch.randn(
            8, 4, generator=torch.Generator().manual_seed(step)), loss_fn, max_steps=4, log_every=1,
            checkpoint_every=1, checkpoint_fn=save, grad_clip=grad_clip, precision=precision, progress=False)
    assert drawn == [0, 1, 2] and all(torch.isfinite(p).all() for p in model.parameters())
    saved = load_checkpoint(path)
    assert saved["history"]["step"][-1] == 2 and all(torch.isfinite(t).all() for t in saved["model"].values())


def test_precision_step_checks_the_norm_alone_when_no_loss_is_given():
    model = fresh_linear()
    model.weight.grad, model.bias.grad = torch.full_like(model.weight, math.nan), torch.zeros_like(model.bias)
    before = [p.detach().clone() for p in model.parameters()]
    optimizer = torch.optim.SGD(model.parameters(), 0.1)
    with pytest.raises(FloatingPointError, match="gradient norm at step 5 is nan"):
        Precision("fp32", "cpu").step(optimizer, None, at_step=5)  # loss None: only the norm is checked
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before))
    # finite gradients again (the refused step's clipping had scaled them by NaN): this step is taken
    model.weight.grad, model.bias.grad = torch.ones_like(model.weight), torch.zeros_like(model.bias)
    Precision("fp32", "cpu").step(optimizer, None, loss=None, at_step=6)
    assert not torch.equal(model.weight, before[0])
    model.weight.grad = torch.full_like(model.weight, math.nan)
    Precision("fp32", "cpu").step(optimizer, None)  # no at_step: no check (a benchmark's bare step)
    assert torch.isnan(model.weight).all()


def test_fp16_keeps_skipping_a_non_finite_step():
    def loss_fn(m, batch):
        loss, n = square_loss(m, batch)
        return (loss * math.inf if len(drawn) == 2 else loss), n  # step 1's loss is inf

    precision, drawn = Precision("fp16", "cpu"), []
    model = linear_run(fresh_linear(), drawn, loss_fn=loss_fn, precision=precision)  # no error: the scaler skips
    assert drawn == [0, 1, 2, 3] and precision.scaler.get_scale() == 2.0**15  # halved once, for the skipped step
    assert all(torch.isfinite(p).all() for p in model.parameters())


@pytest.mark.parametrize("kwargs, named", [
    (dict(lr=math.nan), "lr"), (dict(lr=-1e-3), "lr"), (dict(lr=math.inf), "lr"), (dict(lr="1e-3"), "lr"),
    (dict(weight_decay=math.nan), "weight_decay"), (dict(weight_decay=-0.1), "weight_decay"),
    (dict(betas=(math.nan, 0.95)), "betas"), (dict(betas=(0.9, 1.0)), "betas"), (dict(betas=(0.9,)), "betas"),
    (dict(betas=0.9), "betas"), (dict(betas=(-0.1, 0.9)), "betas"),
])
def test_make_adamw_refuses_numbers_that_would_break_the_update(kwargs, named):
    with pytest.raises(ValueError, match=named):
        make_adamw(nn.Linear(2, 2), **{"lr": 1e-3, **kwargs})


def test_make_adamw_accepts_what_the_course_uses():
    make_adamw(nn.Linear(2, 2), lr=0.0, weight_decay=0.0, betas=(0.0, 0.999))
    make_adamw(nn.Linear(2, 2), lr=3e-3, weight_decay=0.1, betas=[0.9, 0.99])


def test_train_names_a_history_that_is_not_a_history():
    drawn = []
    with pytest.raises(TypeError, match="history must be None or a History, got dict"):
        linear_run(fresh_linear(), drawn, history={})
    assert drawn == []  # refused before the first step


@pytest.mark.parametrize("returned, shown", [
    (lambda loss: loss, r"got a Tensor of shape \(\)"),  # a bare loss, not (loss, tokens)
    (lambda loss: (loss,), "got a tuple of 1"),
    (lambda loss: torch.stack([loss, loss]), r"got a Tensor of shape \(2,\)"),  # would unpack into two silently
    (lambda loss: (loss, "8"), "got a token count of str"),
    (lambda loss: (loss.view(1), 8), r"got a loss of shape \(1,\)"),
    (lambda loss: (1.5, 8), "got a loss of float"),
])
def test_a_loss_fn_that_does_not_return_loss_and_token_count_is_named(returned, shown):
    with pytest.raises(TypeError, match=f"loss_fn must return.*{shown}"):
        linear_run(fresh_linear(), loss_fn=lambda m, b: returned(m(b).pow(2).mean()))


def test_loss_fns_of_the_course_are_accepted():
    for count in (8, torch.tensor(8), torch.tensor(8.0)):
        linear_run(fresh_linear(), loss_fn=lambda m, b, n=count: (m(b).pow(2).mean(), n), max_steps=1)


def classifier_loss(model, batch):
    inputs, targets = batch
    return nn.functional.cross_entropy(model(inputs), targets), (targets != -100).sum()


def flat_grads(model):
    return torch.cat([p.grad.flatten() for p in model.parameters()])


@pytest.mark.parametrize("targets", [
    [-100, -100, -100, 1, 2, 3, 0, 1],  # micro-batch 0 holds 1 target, micro-batch 1 holds 4 (when split in 2)
    [-100, -100, -100, -100, 2, 3, 0, 1],  # micro-batch 0 holds none (its mean loss is NaN)
    [3, 1, 2, 0, -100, -100, -100, -100],
])
@pytest.mark.parametrize("micro_batches", [2, 4])
def test_micro_batches_give_the_gradient_of_the_mean_over_all_the_batch_tokens(targets, micro_batches):
    torch.manual_seed(0)
    model, x, y = nn.Linear(3, 4), torch.randn(8, 3), torch.tensor(targets)
    classifier_loss(model, (x, y))[0].backward()  # one pass over the whole batch: 1 / (its tokens) per target
    whole = flat_grads(model)
    model.zero_grad()
    loss_sum, tokens = backward_micro_batches(model, classifier_loss, (x, y), micro_batches, Precision("fp32"))
    torch.testing.assert_close(flat_grads(model), whole, rtol=1e-6, atol=1e-7)
    assert int(tokens) == int((y != -100).sum()) and math.isfinite(float(loss_sum))


def test_micro_batches_without_any_token_leave_zero_gradients():
    model, x, y = nn.Linear(3, 4), torch.randn(4, 3), torch.full((4,), -100)
    loss_sum, tokens = backward_micro_batches(model, classifier_loss, (x, y), 2, Precision("fp32"))
    assert int(tokens) == 0 and float(loss_sum) == 0.0 and not flat_grads(model).any()


@pytest.mark.parametrize("precision, tolerance", [("fp32", 1e-5), ("fp16", 2e-3)])
def test_train_with_micro_batches_follows_the_whole_batch_when_token_counts_differ(precision, tolerance):
    x = torch.randn(8, 3, generator=torch.Generator().manual_seed(1))
    y = torch.tensor([-100, -100, -100, 1, 2, 3, 0, 1])  # 1 target in the first half, 4 in the second

    def run(micro_batches):
        torch.manual_seed(0)
        model = nn.Linear(3, 4)
        history = train(model, torch.optim.SGD(model.parameters(), 0.5), lambda s: (x, y), classifier_loss,
                        max_steps=5, log_every=5, micro_batches=micro_batches, precision=precision, progress=False)
        return model, history

    (whole, whole_history), (accumulated, accumulated_history) = run(1), run(2)
    torch.testing.assert_close(flat_params(accumulated), flat_params(whole), rtol=tolerance, atol=tolerance)
    assert accumulated_history.loss == pytest.approx(whole_history.loss, rel=tolerance)
    assert accumulated_history.grad_norm == pytest.approx(whole_history.grad_norm, rel=tolerance)


def flat_params(model):
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def test_a_negative_token_count_is_refused_before_it_reverses_the_update():
    from shared.validation import check_loss_fn_result

    with pytest.raises(ValueError, match="negative token count"):
        check_loss_fn_result((torch.tensor(1.0), -4))
    check_loss_fn_result((torch.tensor(1.0), 0))  # a batch without tokens is legal
