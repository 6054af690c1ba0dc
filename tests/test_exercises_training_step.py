"""check_training_step (notebook 07): a learner's training step, run for a few steps against shared.training.train."""

import pytest
import torch

from shared import exercises as ex

from .helpers import accepts, rejects, verdict

check = ex.check_training_step


def train_step(model, optimizer, batch, loss_fn, step, max_steps, schedule, base_lr, grad_clip, plant=""):
    """The solution; `plant` switches in one mistake."""
    shift = 1 if plant == "schedule(step + 1)" else 0
    lr = base_lr * schedule(step + shift, (step + shift) / max_steps)
    if plant not in ("no lr", "lr after step"):
        for group in optimizer.param_groups[:1] if plant == "first group only" else optimizer.param_groups:
            group["lr"] = group["lr"] * lr / base_lr if plant == "lr *= factor" else lr
    if plant != "eval mode":
        model.train()
    if plant not in ("no zero_grad", "zero_grad after backward"):
        optimizer.zero_grad()
    loss, _ = loss_fn(model, batch)
    loss.backward(retain_graph=plant == "backward twice, retained")
    if plant.startswith("backward twice"):
        loss.backward()
    if plant == "zero_grad after backward":
        optimizer.zero_grad()
    if plant not in ("no clip", "clip after step"):
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    if plant == "clip after step":
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    if plant == "lr after step":
        for group in optimizer.param_groups:
            group["lr"] = lr
    return None if plant == "no return" else loss.item()


def planted(plant):
    return lambda *args: train_step(*args, plant=plant)


def test_registered_for_notebook_07():
    assert ex.CHECKERS["07"][-1] is check


def test_accepts_the_solution_and_keeps_the_rng(capsys):
    torch.manual_seed(3)
    before = torch.random.get_rng_state()
    accepts(check, train_step, capsys)
    assert torch.equal(torch.random.get_rng_state(), before)
    accepts(check, lambda *args: torch.tensor(train_step(*args)), capsys)  # a 0-d tensor as the loss is fine


def test_accepts_other_correct_orders(capsys):
    def zero_at_the_end(model, optimizer, batch, loss_fn, step, max_steps, schedule, base_lr, grad_clip):
        for group in optimizer.param_groups:
            group["lr"] = base_lr * schedule(step, step / max_steps)
        model.train()
        loss = loss_fn(model, batch)[0]
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=grad_clip)
        optimizer.step()
        model.zero_grad()  # the model arrives without gradients, so zeroing after the step works as well
        return loss

    accepts(check, zero_at_the_end, capsys)


@pytest.mark.parametrize("plant,hint", [
    ("no zero_grad", "the gradients accumulate"),
    ("zero_grad after backward", "erases the gradients just computed"),
    ("no clip", "clip the gradients"),
    ("clip after step", "too late"),
    ("schedule(step + 1)", "steps count from 0"),
    ("lr after step", "this step ran with the previous step's rate"),
    ("no lr", "set the rate of every group"),
    ("lr *= factor", "multiplies the factors of all steps"),
    ("first group only", "not just the first"),
    ("eval mode", "call model.train()"),
    ("backward twice, retained", "twice doubles the gradients"),
    ("backward twice", "call loss.backward() once per step"),
    ("no return", "return loss.item()"),
])
def test_names_each_planted_mistake(plant, hint, capsys):
    out = rejects(check, planted(plant), capsys, hint)
    assert "Traceback" not in out


def test_errors_and_stubs_are_feedback(capsys):
    def no_unpack(model, optimizer, batch, loss_fn, step, max_steps, schedule, base_lr, grad_clip):
        loss = loss_fn(model, batch)
        loss.backward()

    def one_argument_schedule(model, optimizer, batch, loss_fn, step, max_steps, schedule, base_lr, grad_clip):
        schedule(step)

    def stub(model, optimizer, batch, loss_fn, step, max_steps, schedule, base_lr, grad_clip):
        raise NotImplementedError

    rejects(check, no_unpack, capsys, "returns (loss, n_tokens)")
    rejects(check, one_argument_schedule, capsys, "schedule(step, step / max_steps)")
    rejects(check, lambda model, optimizer, batch: None, capsys, "the arguments are (model, optimizer")
    assert "not solved yet" in verdict(check, stub, capsys)[1]


def test_an_extra_forward_pass_for_logging_is_accepted_and_a_wrong_loss_is_named(capsys):
    def logs_again(*args):
        loss = train_step(*args)
        model, batch, loss_fn = args[0], args[2], args[3]
        with torch.no_grad():
            loss_fn(model, batch)  # e.g. to log the loss after the update: it draws dropout masks, changes nothing
        return loss

    accepts(check, logs_again, capsys)
    out = rejects(check, lambda *args: 2 * train_step(*args), capsys)
    assert "loss" in out
