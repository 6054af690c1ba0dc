import os
import random
import stat

import pytest
import torch

from shared import files
from shared.checkpoint import (
    CorruptCheckpointError,
    RefusedCheckpointError,
    config_from_checkpoint,
    load_checkpoint,
    restore_model,
    restore_training,
    save_checkpoint,
)
from shared.gpt import GPT, GPTConfig
from shared.history import History
from shared.training import make_adamw

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


def trained_state(tmp_path):
    torch.manual_seed(0)
    model = GPT(CONFIG)
    opt = make_adamw(model, 1e-3)
    path = save_checkpoint(tmp_path / "gpt.pt", model, CONFIG, optimizer=opt,
                           history=History(step=[10], loss=[2.5], lr=[1e-3], next_step=10))
    return load_checkpoint(path), model


def test_resuming_never_writes_into_the_loaded_history(tmp_path):
    state, model = trained_state(tmp_path)
    history = restore_training(state, make_adamw(model, 1e-3))
    history.step.append(20)
    history.loss.append(2.0)
    history.next_step = 20
    assert state["history"]["step"] == [10] and state["history"]["loss"] == [2.5]  # the checkpoint is untouched
    again = restore_training(state, make_adamw(model, 1e-3))  # so it can be resumed a second time
    assert again.step == [10] and again.next_step == 10


class FakeCuda:
    """Two CUDA devices' RNG states, for a machine without a GPU."""

    def __init__(self):
        self.states = [torch.tensor([1, 2], dtype=torch.uint8), torch.tensor([3, 4], dtype=torch.uint8)]

    def install(self, monkeypatch):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
        monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: [s.clone() for s in self.states])
        monkeypatch.setattr(torch.cuda, "set_rng_state", lambda state, device: self.states.__setitem__(device, state))


def test_checkpoint_restores_torch_cuda_and_python_random_state(tmp_path, monkeypatch):
    cuda = FakeCuda()
    cuda.install(monkeypatch)
    model = GPT(CONFIG)
    opt = make_adamw(model, 1e-3)
    torch.manual_seed(5)
    random.seed(5)
    path = save_checkpoint(tmp_path / "gpt.pt", model, CONFIG, optimizer=opt, history=History())
    expected = (torch.rand(3), [random.random() for _ in range(3)])
    torch.manual_seed(99)  # a new process starts from other random states
    random.seed(99)
    cuda.states = [torch.zeros(2, dtype=torch.uint8)] * 2
    restore_training(load_checkpoint(path), make_adamw(model, 1e-3))
    assert torch.equal(torch.rand(3), expected[0])
    assert [random.random() for _ in range(3)] == expected[1]
    assert [s.tolist() for s in cuda.states] == [[1, 2], [3, 4]]


def test_files_get_the_normal_mode(tmp_path):
    old = os.umask(0o022)
    try:
        path = save_checkpoint(tmp_path / "gpt.pt", GPT(CONFIG), CONFIG)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # like any new file (mkstemp would give 0o600)


def test_data_reaches_the_disk_before_the_rename(tmp_path, monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(files.os, "fsync", lambda fd: events.append("fsync") or real_fsync(fd))
    monkeypatch.setattr(files.os, "replace", lambda a, b: events.append("replace") or real_replace(a, b))
    save_checkpoint(tmp_path / "gpt.pt", GPT(CONFIG), CONFIG)
    assert events[:2] == ["fsync", "replace"]


def test_load_errors_say_what_is_wrong(tmp_path):
    path = save_checkpoint(tmp_path / "gpt.pt", GPT(CONFIG), CONFIG)
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        load_checkpoint(tmp_path / "missing.pt")
    for name, data in [("truncated.pt", path.read_bytes()[:300]), ("garbage.pt", b"hello world" * 10),
                       ("empty.pt", b"")]:
        (tmp_path / name).write_bytes(data)
        with pytest.raises(CorruptCheckpointError, match="truncated or corrupt"):
            load_checkpoint(tmp_path / name)
    code = tmp_path / "code.pt"
    torch.save({"format": 1, "model": {}, "history": History()}, code)  # a pickled class: would run code
    with pytest.raises(RefusedCheckpointError, match="weights_only") as err:
        load_checkpoint(code)
    assert not isinstance(err.value, CorruptCheckpointError)


def test_config_round_trip_tolerates_new_fields_and_rejects_unknown_ones(tmp_path):
    state, model = trained_state(tmp_path)
    del state["config"]["dropout"]  # saved before the field existed: its default applies
    config = config_from_checkpoint(state, GPTConfig)
    assert config == CONFIG
    restore_model(state, GPT(config), config)  # accepts what config_from_checkpoint built
    state["config"]["flux"] = 3  # saved by a version with a field this one does not know
    with pytest.raises(ValueError, match="flux"):
        config_from_checkpoint(state, GPTConfig)
    with pytest.raises(ValueError, match="flux"):
        restore_model(state, GPT(config), config)
