"""What the project claims about itself: Python and torch floors, the lint step, skip reasons in the default run."""

import re
import sys
import tomllib
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:2])


def torch_floor(requirement_lines) -> tuple[int, ...]:
    floors = [version(line.split(">=")[1]) for line in requirement_lines if re.match(r"torch\s*>=", line.strip())]
    assert len(floors) == 1, requirement_lines
    return floors[0]


def test_torch_floor_covers_zero_attention_for_fully_masked_rows():
    """The fused kernel returns zeros (not NaN) for fully masked rows from torch 2.5; tests/test_attention_masks.py."""
    in_pyproject = torch_floor(PYPROJECT["project"]["dependencies"])
    in_requirements = torch_floor((ROOT / "requirements.txt").read_text().splitlines())
    assert in_pyproject == in_requirements >= (2, 5)
    assert version(torch.__version__) >= in_pyproject  # the tests ran on a torch the project allows


def test_requires_python_claims_only_what_runs():
    floor = version(PYPROJECT["project"]["requires-python"])
    assert floor == (3, 11)  # what CI and environment.yml run; nothing older is tested
    assert sys.version_info[:2] >= floor
    assert PYPROJECT["tool"]["ruff"]["target-version"] == f"py{floor[0]}{floor[1]}"
    assert "python=3.11" in (ROOT / "environment.yml").read_text()


def test_ci_lints_before_testing_and_shows_skip_reasons():
    assert "-rs" in PYPROJECT["tool"]["pytest"]["ini_options"]["addopts"].split()
    assert any(line.startswith("ruff==") for line in (ROOT / "ci" / "requirements.txt").read_text().splitlines())
    commands = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert commands.index("ruff check .") < commands.index("pytest")
