import errno
import os
import random
import socket
import stat
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from torch.nn.parallel import DistributedDataParallel as DDP

from shared import checkpoint, files
from shared.checkpoint import (
    CorruptCheckpointError,
    RefusedCheckpointError,
    config_from_checkpoint,
    load_checkpoint,
    restore_model,
    restore_training,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from shared.distributed import distributed
from shared.gpt import GPT, GPTConfig
from shared.history import History
from shared.reversal import LMBatch
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
    with pytest.raises(TypeError, match="config must be a dataclass instance, got type"):  # the class, not one
        save_checkpoint(tmp_path / "x.pt", model, GPTConfig)
    with pytest.raises(TypeError, match=r"config\['data'\] is a pathlib"):  # torch.load would refuse it
        save_checkpoint(tmp_path / "x.pt", model, PathConfig())
    with pytest.raises(TypeError, match="extra must be a dict"):
        save_checkpoint(tmp_path / "x.pt", model, CONFIG, extra=[1, 2])


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
    """CUDA devices' RNG states (two by default), for a machine without a GPU."""

    def __init__(self, n_devices: int = 2):
        self.states = [torch.tensor([2 * i + 1, 2 * i + 2], dtype=torch.uint8) for i in range(n_devices)]

    def install(self, monkeypatch):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: len(self.states))
        monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: [s.clone() for s in self.states])
        monkeypatch.setattr(torch.cuda, "set_rng_state", self.set_rng_state)

    def set_rng_state(self, state, device):
        if not 0 <= device < len(self.states):  # as torch.cuda does for a device this machine lacks
            raise RuntimeError(f"CUDA error: invalid device ordinal {device}")
        if type(state) is not torch.Tensor or state.device.type != "cpu" or state.dtype != torch.uint8:
            raise TypeError("RNG state must be a torch.ByteTensor")  # what torch says for a GPU tensor
        self.states[device] = state


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


@dataclass
class PathConfig:
    data: Path = Path("data")


@pytest.mark.parametrize("extra, named", [
    ({"p": Path("data")}, r"extra\['p'\] is a pathlib\..*Path"),
    ({"batch": LMBatch(torch.ones(1), torch.ones(1))}, r"extra\['batch'\] is a shared.reversal.LMBatch"),
    ({"runs": [1, {"fn": len}]}, r"extra\['runs'\]\[1\]\['fn'\] is a builtins.builtin_function_or_method"),
    ({Path("key"): 1}, r"a key of extra is a pathlib\..*Path"),
])
def test_save_refuses_what_loading_would_refuse_and_names_the_entry(tmp_path, extra, named):
    with pytest.raises(TypeError, match=named):
        save_checkpoint(tmp_path / "gpt.pt", GPT(CONFIG), CONFIG, extra=extra)
    assert not (tmp_path / "gpt.pt").exists()  # nothing written


def test_every_kind_of_value_save_accepts_loads_back(tmp_path):
    extra = {"none": None, "flags": (True, 1, 2.5, 1j), "text": ["abc", b"xyz"], "set": {1, 2},
             "tensor": torch.arange(3), "dtype": torch.bfloat16, "device": torch.device("cpu"),
             "shape": torch.Size([2, 3]), 7: {"nested": [1.5]}}
    path = save_checkpoint(tmp_path / "gpt.pt", GPT(CONFIG), CONFIG, extra=extra)
    loaded = load_checkpoint(path)["extra"]
    assert loaded.keys() == extra.keys() and torch.equal(loaded.pop("tensor"), extra.pop("tensor"))
    assert loaded == extra


@pytest.fixture
def one_rank_group(monkeypatch):
    """A gloo process group of one rank in this process, so that DDP can wrap a model."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for key, value in dict(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                           MASTER_PORT=str(port)).items():
        monkeypatch.setenv(key, value)
    with distributed(backend="gloo") as ranks:
        yield ranks


def test_wrapped_models_are_saved_and_restored_as_the_plain_model(tmp_path, one_rank_group):
    torch.manual_seed(0)
    model = GPT(CONFIG)
    for wrapped in (DDP(model), torch.compile(model)):  # state_dict keys 'module.…' and '_orig_mod.…'
        path = save_checkpoint(tmp_path / "gpt.pt", wrapped, CONFIG)
        state = load_checkpoint(path)
        assert list(state["model"]) == list(model.state_dict())
        for target in (GPT(CONFIG), DDP(GPT(CONFIG))):  # into a plain model, or one already wrapped
            restored = restore_model(state, target, CONFIG)
            assert all(torch.equal(a, b) for a, b in zip(restored.parameters(), model.parameters()))


def test_checkpoints_without_the_new_resume_keys_still_resume(tmp_path):
    state, model = trained_state(tmp_path)
    for key in ("grad_scaler", "rng_per_rank"):  # saved before these were recorded
        state["history"].pop(key, None)
    assert restore_training(state, make_adamw(model, 1e-3)).next_step == 10


def test_resuming_with_another_number_of_ranks_warns_and_uses_rank_0s_random_state(tmp_path):
    state, model = trained_state(tmp_path)
    torch.manual_seed(1)
    rank0 = rng_state()
    torch.manual_seed(2)
    state["history"]["rng_per_rank"] = [rank0, rng_state()]  # saved by 2 ranks; resumed here by 1
    state["rng"] = rank0
    expected = torch.rand(3, generator=torch.Generator().set_state(rank0["torch"]))
    with pytest.warns(UserWarning, match="2 ranks"):
        restore_training(state, make_adamw(model, 1e-3))
    assert torch.equal(torch.rand(3), expected)


def saved_on(n_devices: int, tmp_path, monkeypatch) -> dict:
    """A training checkpoint saved on a machine with `n_devices` (fake) GPUs, loaded back."""
    with monkeypatch.context() as patched:
        FakeCuda(n_devices).install(patched)
        model = GPT(CONFIG)
        path = save_checkpoint(tmp_path / f"gpu{n_devices}.pt", model, CONFIG, optimizer=make_adamw(model, 1e-3),
                               history=History())
    return load_checkpoint(path)


@pytest.mark.parametrize("saved, here", [(2, 1), (2, 3), (0, 2)])
def test_cuda_random_states_are_restored_on_the_devices_both_machines_have(saved, here, tmp_path, monkeypatch):
    state = saved_on(saved, tmp_path, monkeypatch) if saved else trained_state(tmp_path)[0]
    cuda = FakeCuda(here)
    cuda.install(monkeypatch)
    cuda.states = [torch.zeros(2, dtype=torch.uint8) for _ in range(here)]
    restore_training(state, make_adamw(GPT(CONFIG), 1e-3))  # more saved states than devices: no error
    restored = min(saved, here)
    assert [s.tolist() for s in cuda.states[:restored]] == [[2 * i + 1, 2 * i + 2] for i in range(restored)]
    assert all(s.tolist() == [0, 0] for s in cuda.states[restored:])  # a device without a saved state: untouched


class OnTheGpu(torch.Tensor):
    """Stands for a random state that load_checkpoint(map_location="cuda") put on the GPU: .cpu() copies it back."""

    def cpu(self, *args, **kwargs):
        return self.as_subclass(torch.Tensor).clone()


def test_random_states_on_another_device_are_copied_to_the_cpu_before_restoring(tmp_path, monkeypatch):
    state = saved_on(2, tmp_path, monkeypatch)
    expected = torch.rand(3, generator=torch.Generator().set_state(state["rng"]["torch"]))
    state["rng"]["torch"] = state["rng"]["torch"].as_subclass(OnTheGpu)
    state["rng"]["cuda"] = [s.as_subclass(OnTheGpu) for s in state["rng"]["cuda"]]
    real_set_rng_state = torch.set_rng_state

    def cpu_only(new_state):
        if type(new_state) is not torch.Tensor:
            raise TypeError("RNG state must be a torch.ByteTensor")  # what torch says for a GPU tensor
        real_set_rng_state(new_state)

    monkeypatch.setattr(torch, "set_rng_state", cpu_only)
    cuda = FakeCuda(2)
    cuda.install(monkeypatch)
    restore_training(state, make_adamw(GPT(CONFIG), 1e-3))
    assert torch.equal(torch.rand(3), expected) and [s.tolist() for s in cuda.states] == [[1, 2], [3, 4]]


@pytest.mark.parametrize("entry, bad, named", [
    ("torch", lambda s: s.long(), r"rng\['torch'\] must be a uint8 tensor.*int64"),
    ("torch", lambda s: s.tolist(), r"rng\['torch'\] must be a uint8 tensor.*got list"),
    ("cuda", lambda s: [s[0].float(), s[1]], r"rng\['cuda'\]\[0\] must be a uint8 tensor.*float32"),
])
def test_a_random_state_of_another_type_is_refused_by_name(entry, bad, named, tmp_path, monkeypatch):
    state = saved_on(2, tmp_path, monkeypatch)
    state["rng"][entry] = bad(state["rng"][entry])
    FakeCuda(2).install(monkeypatch)
    with pytest.raises(TypeError, match=named):
        restore_training(state, make_adamw(GPT(CONFIG), 1e-3))


def flip_byte(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x10
    path.write_bytes(bytes(data))


def offset_of(path: Path, needle: bytes) -> int:
    """Where `needle` (e.g. a tensor's bytes) lies in the file: inside exactly one zip entry's data."""
    data = path.read_bytes()
    at = data.find(needle)
    assert at > 0 and data.find(needle, at + 1) == -1
    with zipfile.ZipFile(path) as archive:  # the stored (uncompressed) entries: header, then the bytes
        entries = [info for info in archive.infolist() if info.header_offset < at]
        name = entries[-1].filename
        assert name.endswith("/data.pkl") or name.rsplit("/", 2)[-2:][0] == "data"  # data.pkl or data/N
    return at


def test_a_flipped_byte_inside_a_tensor_is_refused_and_named(tmp_path):
    torch.manual_seed(0)
    model = GPT(CONFIG)
    path = save_checkpoint(tmp_path / "gpt.pt", model, CONFIG)
    weight = model.tok_emb.weight.detach().numpy().tobytes()
    flip_byte(path, offset_of(path, weight) + len(weight) // 2)  # one bit of one weight, as a bad disk would
    with pytest.raises(CorruptCheckpointError, match=r"gpt\.pt.*model\['tok_emb\.weight'\]"):
        load_checkpoint(path)


def test_a_flipped_byte_among_the_plain_values_is_refused(tmp_path):
    model = GPT(CONFIG)
    path = save_checkpoint(tmp_path / "gpt.pt", model, CONFIG, optimizer=make_adamw(model, 1e-3),
                           history=History(step=[10], loss=[2.5], next_step=10))
    flip_byte(path, offset_of(path, struct.pack(">d", 2.5)) + 7)  # the logged loss (a float in data.pkl)
    with pytest.raises(CorruptCheckpointError, match=r"gpt\.pt"):
        load_checkpoint(path)


def test_a_checkpoint_saved_before_checksums_loads_unverified(tmp_path):
    path = save_checkpoint(tmp_path / "gpt.pt", GPT(CONFIG), CONFIG)
    state = torch.load(path, weights_only=True)
    del state["checksums"]  # what older versions wrote
    torch.save(state, path)
    restore_model(load_checkpoint(path), GPT(CONFIG), CONFIG)


@dataclass
class WidthConfig:
    width: int = 3


def test_save_refuses_a_config_the_model_was_not_built_with(tmp_path):
    model = GPT(CONFIG)
    bigger = GPTConfig(vocab_size=13, block_size=8, n_layers=2, n_heads=2, d_model=8)
    with pytest.raises(ValueError, match=r"config.*n_layers.*\(1, 2\)"):
        save_checkpoint(tmp_path / "gpt.pt", model, bigger)
    with pytest.raises(ValueError, match="config is a WidthConfig, but the model was built with a GPTConfig"):
        save_checkpoint(tmp_path / "gpt.pt", model, WidthConfig())
    save_checkpoint(tmp_path / "linear.pt", torch.nn.Linear(3, 3), WidthConfig())  # no model.config: taken on trust
    assert not (tmp_path / "gpt.pt").exists()  # nothing written that could not be rebuilt
    changed = GPT(GPTConfig(vocab_size=13, block_size=8, n_layers=1, n_heads=2, d_model=8))
    changed.config.block_size = 16  # the same object as model.config: only the weights' shapes give it away
    with pytest.raises(ValueError, match=r"other shapes.*pos_emb.*\(8, 8\), \(16, 8\).*changed after"):
        save_checkpoint(tmp_path / "changed.pt", changed, changed.config)
    assert not (tmp_path / "changed.pt").exists()


@pytest.mark.parametrize("map_location, named", [
    ("banana", "map_location must be a device"), ("cuda", "map_location='cuda'.*no CUDA"),
    (torch.device("cuda", 0), "no CUDA"), (None, "map_location must be a device"),
])
def test_a_device_this_machine_lacks_is_not_called_corruption(tmp_path, monkeypatch, map_location, named):
    path = save_checkpoint(tmp_path / "gpt.pt", GPT(CONFIG), CONFIG)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match=named) as err:
        load_checkpoint(path, map_location=map_location)
    assert not isinstance(err.value, CorruptCheckpointError)
    assert load_checkpoint(path, map_location=torch.device("cpu"))["config_class"] == "GPTConfig"


@pytest.mark.parametrize("error", [PermissionError(13, "Permission denied"), MemoryError(),
                                   torch.OutOfMemoryError("CUDA out of memory")])
def test_errors_that_are_not_damage_are_not_called_corruption(tmp_path, monkeypatch, error):
    path = save_checkpoint(tmp_path / "gpt.pt", GPT(CONFIG), CONFIG)

    def failing_load(*args, **kwargs):
        raise error

    monkeypatch.setattr(torch, "load", failing_load)
    with pytest.raises(type(error)) as raised:
        load_checkpoint(path)
    assert not isinstance(raised.value, CorruptCheckpointError)


class FullDisk:
    """A file on a disk that fills up after `room` bytes: write() then raises OSError(ENOSPC), as the OS does."""

    def __init__(self, file, room: int):
        self.file, self.room = file, room

    def write(self, data):
        if len(data) > self.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= len(data)
        return self.file.write(data)

    def __getattr__(self, name):
        return getattr(self.file, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.file.close()


def test_a_full_disk_says_so_and_keeps_the_old_file(tmp_path, monkeypatch):
    path = save_checkpoint(tmp_path / "gpt.pt", GPT(CONFIG), CONFIG)
    before = path.read_bytes()
    monkeypatch.setattr(checkpoint, "open", lambda *args, **kwargs: FullDisk(open(*args, **kwargs), 1000),
                        raising=False)
    with pytest.raises(OSError, match=f"no space left while writing {path}") as err:
        save_checkpoint(path, GPT(CONFIG), CONFIG)
    assert err.value.errno == errno.ENOSPC and "inline_container" not in str(err.value)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["gpt.pt"]


def test_set_rng_state_names_what_is_missing():
    with pytest.raises(TypeError, match=r"rng\['torch'\] must be a uint8 tensor.*got NoneType"):
        set_rng_state({})
    with pytest.raises(TypeError, match=r"state \(what rng_state\(\) returned\) must be a dict, got list"):
        set_rng_state([1, 2])


def test_a_flipped_byte_in_the_optimizer_state_is_refused_and_named(tmp_path):
    torch.manual_seed(0)
    model = GPT(CONFIG)
    optimizer = make_adamw(model, 1e-3)
    model(torch.zeros(1, 4, dtype=torch.long)).sum().backward()
    optimizer.step()  # now AdamW holds exp_avg tensors
    path = save_checkpoint(tmp_path / "gpt.pt", model, CONFIG, optimizer=optimizer)
    moment = optimizer.state[model.tok_emb.weight]["exp_avg_sq"].numpy().tobytes()
    flip_byte(path, offset_of(path, moment) + len(moment) // 2)
    with pytest.raises(CorruptCheckpointError, match=r"optimizer"):
        load_checkpoint(path)


@pytest.mark.parametrize("device", ["xpu", "hpu", "privateuseone"])
def test_devices_the_course_does_not_run_on_are_refused_by_name_not_called_corruption(tmp_path, device):
    path = save_checkpoint(tmp_path / "gpt.pt", GPT(CONFIG), CONFIG)
    with pytest.raises(ValueError, match="map_location") as info:
        load_checkpoint(path, map_location=device)
    assert not isinstance(info.value, CorruptCheckpointError)


def test_set_rng_state_names_a_broken_python_state():
    state = rng_state()
    state["python"] = 5
    with pytest.raises(TypeError, match=r"rng\['python'\]"):
        set_rng_state(state)
