import pytest
import torch

from shared.checkpoint import (
    config_from_checkpoint,
    load_checkpoint,
    restore_model,
    restore_training,
    save_checkpoint,
)
from shared.gpt import GPT, GPTConfig
from shared.training import History, make_adamw

CONFIG = GPTConfig(vocab_size=13, block_size=8, n_layers=1, n_heads=2, d_model=8)


def test_round_trip_restores_weights_config_and_training_state(tmp_path):
    torch.manual_seed(0)
    model = GPT(CONFIG)
    opt = make_adamw(model, 1e-3)
    model(torch.zeros(1, 3, dtype=torch.long)).sum().backward()
    opt.step()
    path = save_checkpoint(tmp_path / "run" / "gpt.pt", model, CONFIG, optimizer=opt,
                           history=History(step=[1], loss=[2.5], next_step=1), extra={"chars": "abc"})
    assert [p.name for p in path.parent.iterdir()] == ["gpt.pt"]  # no temporary file left behind
    state = load_checkpoint(path)
    config = config_from_checkpoint(state, GPTConfig)
    assert config == CONFIG and state["extra"] == {"chars": "abc"}
    restored = restore_model(state, GPT(config), config)
    for a, b in zip(model.state_dict().values(), restored.state_dict().values()):
        assert torch.equal(a, b)
    opt2 = make_adamw(restored, 1e-3)
    history = restore_training(state, opt2)
    assert history.loss == [2.5] and history.next_step == 1
    assert torch.equal(opt2.state_dict()["state"][0]["exp_avg"], opt.state_dict()["state"][0]["exp_avg"])


def test_clear_errors(tmp_path):
    model = GPT(CONFIG)
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        load_checkpoint(tmp_path / "missing.pt")
    path = save_checkpoint(tmp_path / "gpt.pt", model, CONFIG)
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(ValueError, match="not a readable checkpoint"):
        load_checkpoint(truncated)
    other = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(1)}, other)
    with pytest.raises(ValueError, match="not a checkpoint written by shared.checkpoint"):
        load_checkpoint(other)
    state = load_checkpoint(path)
    bigger = GPTConfig(vocab_size=13, block_size=8, n_layers=2, n_heads=2, d_model=8)
    with pytest.raises(ValueError, match="n_layers"):
        restore_model(state, GPT(bigger), bigger)
    with pytest.raises(ValueError, match="not saved during training"):
        restore_training(state, make_adamw(model, 1e-3))
    with pytest.raises(TypeError, match="config must be a dataclass"):
        save_checkpoint(tmp_path / "x.pt", model, {"vocab_size": 13})


def test_failed_save_keeps_the_old_file(tmp_path, monkeypatch):
    path = save_checkpoint(tmp_path / "gpt.pt", GPT(CONFIG), CONFIG)
    before = path.read_bytes()

    def broken_save(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(path, GPT(CONFIG), CONFIG)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["gpt.pt"]
