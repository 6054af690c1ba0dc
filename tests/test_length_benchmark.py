"""benchmarks/length_generalisation.py: argument checks and the JSON line it prints."""

import importlib.util
import json
import pathlib

import pytest

PATH = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "length_generalisation.py"
spec = importlib.util.spec_from_file_location("length_generalisation", PATH)
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def test_rejects_a_scheme_outside_its_architecture(capsys):
    with pytest.raises(SystemExit):
        bench.main(["--scheme", "nope", "--arch", "encoder_decoder", "--seconds", "5"])
    assert "applies to" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench.main(["--scheme", "alibi", "--seconds", "0"])


def test_prints_exact_match_for_every_length(capsys):
    result = bench.main(["--scheme", "alibi", "--seconds", "60", "--steps", "2", "--n-test", "3", "--d-model", "16",
                         "--n-layers", "1"])
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line == json.loads(json.dumps(result))
    assert list(line["exact_match"]) == [str(n) for n in range(1, 33)]
    assert line["steps"] == 2 and line["n_test"]["1"] == 3 and line["d_model"] == 16
    assert all(0.0 <= v <= 1.0 for v in line["exact_match"].values())
    assert {"mean_1_12", "mean_13_16", "mean_17_24", "train_lengths"} <= set(line)
