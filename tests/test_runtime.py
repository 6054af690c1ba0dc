"""shared.runtime: the run size (COURSE_SIZE) and the device (COURSE_DEVICE; MPS only when asked), without a GPU."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from shared import runtime
from shared.runtime import choose, fast_mode, get_device, run_size, setup


@pytest.fixture
def machine(monkeypatch):
    """A machine whose CUDA and MPS availability the test sets; no course variable set."""
    for name in (runtime.SIZE_ENV, runtime.DEVICE_ENV, runtime.RETIRED_ENV):
        monkeypatch.delenv(name, raising=False)

    def make(cuda=False, mps=False):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
        monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)

    return make


def test_a_mac_runs_on_the_cpu_unless_mps_is_asked_for(machine, monkeypatch, capsys):
    machine(mps=True)
    assert get_device() == torch.device("cpu")
    assert setup().type == "cpu"
    out = capsys.readouterr().out
    assert out.startswith("device: cpu | fast mode: off (CPU size) | torch ")
    assert "Apple MPS is available but not used" in out and "COURSE_DEVICE=mps" in out
    monkeypatch.setenv("COURSE_DEVICE", "mps")
    assert get_device() == torch.device("mps")
    assert run_size() == "cpu"  # MPS runs the CPU size: the GPU size is sized for CUDA devices
    monkeypatch.setattr(runtime, "seed_everything", lambda seed: None)  # seeding would touch the MPS generator
    assert setup() == torch.device("mps")
    assert "has not been tested on MPS" in capsys.readouterr().out


def test_cuda_is_the_default_where_present_and_says_nothing_of_mps(machine, capsys):
    machine(cuda=True, mps=False)
    assert get_device() == torch.device("cuda") and run_size() == "gpu"
    machine(cuda=False, mps=False)
    assert setup() == torch.device("cpu")
    assert "MPS" not in capsys.readouterr().out


def test_course_device_rejects_unknown_and_missing_devices(machine, monkeypatch):
    machine()
    monkeypatch.setenv("COURSE_DEVICE", "gpu")
    with pytest.raises(ValueError, match="COURSE_DEVICE must be one of cpu, cuda, mps.*'gpu'"):
        get_device()
    monkeypatch.setenv("COURSE_DEVICE", "cuda")
    with pytest.raises(ValueError, match="COURSE_DEVICE=cuda, but PyTorch finds no CUDA device"):
        get_device()
    monkeypatch.setenv("COURSE_DEVICE", "mps")
    with pytest.raises(ValueError, match="COURSE_DEVICE=mps, but this PyTorch cannot use Apple's MPS"):
        get_device()
    monkeypatch.setenv("COURSE_DEVICE", " CPU ")
    assert get_device() == torch.device("cpu")
    assert get_device("meta") == torch.device("meta")  # an explicit device is taken as it is


@pytest.mark.parametrize("size, picked", [("fast", 1), ("cpu", 2), ("gpu", 3), ("GPU", 3)])
def test_course_size_overrides_the_device(machine, monkeypatch, capsys, size, picked):
    machine(cuda=False)
    monkeypatch.setenv("COURSE_SIZE", size)
    assert choose(fast=1, cpu=2, cuda=3) == picked
    assert choose(fast=1, cpu=2, cuda=3, device="cuda") == picked  # the variable wins over the device
    assert fast_mode() == (picked == 1)
    setup()
    expected = "on (small sizes, for tests)" if picked == 1 else f"off ({size.upper()} size)"
    assert capsys.readouterr().out.startswith(f"device: cpu | fast mode: {expected} |")


def test_without_course_size_the_device_decides(machine):
    machine(cuda=False)
    assert not fast_mode()
    assert choose(fast=1, cpu=2, cuda=3) == 2
    assert choose(fast=1, cpu=2, cuda=3, device="cuda") == 3
    machine(cuda=True)
    assert choose(fast=1, cpu=2, cuda=3) == 3


@pytest.mark.parametrize("value", ["1", "small", "full"])
def test_a_bad_course_size_names_the_variable(machine, monkeypatch, value):
    machine()
    monkeypatch.setenv("COURSE_SIZE", value)
    with pytest.raises(ValueError, match=f"COURSE_SIZE must be one of fast, cpu, gpu .*'{value}'"):
        choose(fast=1, cpu=2, cuda=3)
    with pytest.raises(ValueError, match="COURSE_SIZE"):
        fast_mode()


@pytest.mark.parametrize("value", ["1", "0"])
def test_the_retired_course_fast_says_what_replaced_it(machine, monkeypatch, value):
    machine()
    monkeypatch.setenv("COURSE_FAST", value)
    with pytest.raises(ValueError, match="COURSE_FAST is no longer read: set COURSE_SIZE=fast"):
        fast_mode()
    with pytest.raises(ValueError, match="COURSE_FAST"):
        setup()


@pytest.mark.parametrize("value, size", [(None, "fast"), ("", "fast"), ("  ", "fast"), ("cpu", "cpu")])
def test_pytest_runs_fast_mode_when_course_size_is_unset_or_empty(value, size):
    """conftest.py sets COURSE_SIZE for the notebooks' kernels: an empty value counts as unset, not as CPU size."""
    root = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if k != "COURSE_SIZE"}
    if value is not None:
        env["COURSE_SIZE"] = value
    done = subprocess.run([sys.executable, "-c", "import os, conftest; print(os.environ['COURSE_SIZE'])"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == size
