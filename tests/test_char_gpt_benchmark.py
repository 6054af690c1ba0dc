"""benchmarks/char_gpt.py: when --target-loss evaluates, what it reports, and the command it records."""

import importlib.util
import math
import pathlib
import shlex

import torch

from shared.gpt import GPT, GPTConfig
from shared.history import History
from shared.shakespeare import split_loss

PATH = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "char_gpt.py"
spec = importlib.util.spec_from_file_location("char_gpt_benchmark", PATH)
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def tiny():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=11, block_size=8, d_model=16, n_heads=2, n_layers=1, dropout=0.0))
    val = torch.randint(0, 11, (100,), generator=torch.Generator().manual_seed(1))
    return model, val


def test_target_watch_skips_while_far_then_measures_until_the_target_is_reached():
    model, val = tiny()
    truth = split_loss(model, val, 8, batch_size=64)  # about ln 11 = 2.4 for an untrained model
    history = History()
    watch = bench.TargetWatch(val, 8, target=truth, history=history, margin=0.5)  # reached when equal
    history.loss.append(truth + 0.6)  # the training loss is further than the margin above the target: skipped
    assert math.isnan(watch(model)) and (watch.count, watch.skipped) == (0, 1)
    history.loss.append(truth + 0.3)  # within the margin: evaluated, and the target is reached
    assert watch(model) == truth and watch.reached and watch.count == 1 and watch.seconds > 0
    history.loss.append(truth - 1.0)  # reached before: no more evaluations, and none counted as skipped
    assert math.isnan(watch(model)) and (watch.count, watch.skipped) == (1, 1)


def test_target_watch_without_a_target_evaluates_every_time():
    model, val = tiny()
    history = History()
    watch = bench.TargetWatch(val, 8, target=None, history=history, margin=0.5)
    history.loss.append(99.0)
    assert [watch(model) for _ in range(3)] == [split_loss(model, val, 8, batch_size=64)] * 3
    assert watch.count == 3 and not watch.reached and watch.skipped == 0


def test_the_recorded_command_reads_back_as_the_same_arguments():
    argv = ["--shape", "modern", "--optimizer", "muon", "--save", "runs/my run.pt"]
    line = bench.command_line(argv)
    assert shlex.split(line) == ["python", "benchmarks/char_gpt.py", *argv]


def test_char_and_bpe_splits_predict_the_same_validation_bytes():
    """--tokenizer: both tokenizers cut the text at the same character, BPE is trained on the training part only,
    and val_bytes counts the bytes the predicted tokens stand for (all but the first token's)."""
    text = ("First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n" * 30)[:2000]
    val_text = text[int(0.9 * len(text)):]
    char, char_train, char_val, char_bytes = bench.tokenized_splits(text, "char", 300)
    bpe, bpe_train, bpe_val, bpe_bytes = bench.tokenized_splits(text, "bpe", 300)
    assert char.decode(char_val) == val_text and bpe.decode(bpe_val.tolist()) == val_text
    assert len(bpe_val) < len(char_val) and bpe.vocab_size == 300
    first = len(bpe.decode_bytes(bpe_val[:1].tolist()))
    assert char_bytes == len(val_text.encode()) - 1 and bpe_bytes == len(val_text.encode()) - first
    tail = " zzzz" * 40  # the most frequent pair of the whole text, all of it in the validation part
    unseen = bench.tokenized_splits(text[:1800] + tail, "bpe", 300)[0]  # the cut falls at 1,800
    assert not any(b"zz" in token for token in unseen.vocab.values())  # merges come from the training part only
