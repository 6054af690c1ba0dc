"""benchmarks/fast_attention.py: its slope, its memory calibration, and one small run's JSON line."""

import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import fast_attention as bench  # noqa: E402


def test_slope_is_the_power_of_the_growth():
    xs = [512, 1024, 2048, 4096]
    assert bench.slope(xs, [3 * x for x in xs]) == pytest.approx(1.0)
    assert bench.slope(xs, [x * x + 0.0 for x in xs]) == pytest.approx(2.0)


def test_the_calibration_reads_known_tensors_exactly():
    assert bench.calibration() == dict(expected=6_000_000, measured=6_000_000, exact=True)


def test_a_small_run_prints_one_line_with_every_variant():
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "fast_attention.py"), "--max-t", "1024",
                           "--repeats", "1", "--sweep-t", "256", "--blocks", "64", "128", "--block", "64"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1
    result = json.loads(lines[0])
    assert result["T"] == [512, 1024] and result["best_block"] in (64, 128) and result["block"] == 64
    assert set(result["skip_ms_at_sweep_t"]) == {"tiled causal", "tiled no mask", "plain"}
    assert set(result["peak_bytes"]) == set(result["time_ms"]) == {"plain", "tiled", "sdpa"}
    plain, tiled = result["peak_bytes"]["plain"], result["peak_bytes"]["tiled"]
    assert plain[1] > 3.5 * plain[0] and tiled[1] < 2 * tiled[0]  # quadratic against at most linear
    assert result["command"].startswith("python benchmarks/fast_attention.py --max-t 1024")
