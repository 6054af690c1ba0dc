"""tiny Shakespeare: download against a local HTTP server, tokenizer, split, batches, split loss."""

import hashlib
import http.server
import os
import socket
import stat

import pytest
import torch

from shared import shakespeare
from shared.gpt import GPT, GPTConfig
from shared.shakespeare import (
    CharTokenizer,
    CorpusError,
    block_batches,
    download,
    load_tiny_shakespeare,
    split_loss,
    train_val_split,
)
from tests.helpers import local_server

CORPUS = ("First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n" * 40).encode()
CORPUS_SHA = hashlib.sha256(CORPUS).hexdigest()


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (name fixed by http.server)
        self.send_response(200)
        self.send_header("Content-Length", str(len(CORPUS)))
        self.end_headers()
        if self.path == "/truncated":  # promise the whole file, send half, hang up
            self.wfile.write(CORPUS[: len(CORPUS) // 2])
            self.wfile.flush()
            self.close_connection = True
        else:
            self.wfile.write(CORPUS)

    def log_message(self, *args):  # keep the test output clean
        pass


@pytest.fixture(scope="module")
def server():
    with local_server(_Handler) as url:
        yield url


def _leftovers(folder):
    return sorted(p.name for p in folder.iterdir())


def test_download_good_file_is_saved_and_loaded(server, tmp_path):
    target = tmp_path / "data" / "corpus.txt"
    text = load_tiny_shakespeare(target, url=f"{server}/good", sha256=CORPUS_SHA)
    assert text == CORPUS.decode() and target.read_bytes() == CORPUS
    assert _leftovers(target.parent) == ["corpus.txt"]  # no temporary file left behind


def test_download_wrong_checksum_saves_nothing(server, tmp_path):
    target = tmp_path / "corpus.txt"
    with pytest.raises(CorpusError, match="sha256") as err:
        load_tiny_shakespeare(target, url=f"{server}/good", sha256="0" * 64)
    assert "0" * 64 in str(err.value) and str(target) in str(err.value)
    assert _leftovers(tmp_path) == []


def test_truncated_download_never_replaces_the_target(server, tmp_path):
    target = tmp_path / "corpus.txt"
    target.write_text("an older file")
    with pytest.raises(CorpusError):
        download(f"{server}/truncated", target, CORPUS_SHA)
    assert target.read_text() == "an older file"  # untouched: the partial download went to a temp file
    assert _leftovers(tmp_path) == ["corpus.txt"]


def test_server_down_explains_how_to_get_the_file(tmp_path):
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    target = tmp_path / "corpus.txt"
    url = f"http://127.0.0.1:{port}/input.txt"
    with pytest.raises(CorpusError) as err:
        load_tiny_shakespeare(target, url=url, sha256=CORPUS_SHA)
    message = str(err.value)
    assert url in message and str(target) in message and CORPUS_SHA in message and shakespeare.PATH_ENV in message
    assert _leftovers(tmp_path) == []


def test_corrupt_local_file_is_never_used(tmp_path):
    target = tmp_path / "corpus.txt"
    target.write_bytes(CORPUS[:-5])
    with pytest.raises(CorpusError, match="partial or corrupt"):
        load_tiny_shakespeare(target, sha256=CORPUS_SHA, allow_download=False)


def test_local_copy_by_argument_and_environment_variable(tmp_path, monkeypatch):
    copy = tmp_path / "copy.txt"
    copy.write_bytes(CORPUS)
    assert load_tiny_shakespeare(copy, sha256=CORPUS_SHA, allow_download=False) == CORPUS.decode()
    monkeypatch.setenv(shakespeare.PATH_ENV, str(copy))
    assert load_tiny_shakespeare(sha256=CORPUS_SHA, allow_download=False) == CORPUS.decode()
    with pytest.raises(CorpusError, match="allow_download=False"):
        load_tiny_shakespeare(tmp_path / "missing.txt", sha256=CORPUS_SHA, allow_download=False)


@pytest.mark.skipif(not shakespeare.default_path().is_file(), reason="tinyshakespeare.txt not in the data folder")
def test_real_corpus_in_data_folder():
    text = load_tiny_shakespeare(shakespeare.default_path(), allow_download=False)
    assert len(text.encode()) == shakespeare.N_BYTES
    assert CharTokenizer.from_text(text).vocab_size == 65


def test_tokenizer_round_trip_and_errors():
    text = CORPUS.decode()
    tok = CharTokenizer.from_text(text)
    ids = tok.encode(text)
    assert ids.dtype == torch.long and ids.shape == (len(text),)
    assert tok.decode(ids) == text and tok.decode(ids.tolist()) == text
    assert tok.chars == "".join(sorted(set(text))) and tok.vocab_size == len(set(text))
    with pytest.raises(ValueError, match="'Z'"):
        tok.encode("Speak Z")
    with pytest.raises(ValueError, match="ids must be ints"):
        tok.decode([0, tok.vocab_size])
    with pytest.raises(TypeError, match="ids must be ints, got True"):  # a bool would be read as 1 or 0
        tok.decode([True, False])
    with pytest.raises(TypeError, match="ids must be ints"):
        tok.decode(torch.tensor([True, False]))


def test_decode_takes_numpy_ints_and_refuses_a_single_id_clearly():
    """numpy ints are ints (np.int64 was refused as "not an int"); one id, a 0-d tensor or array, gets a clear
    TypeError (it had been "'int' object is not iterable") rather than one character."""
    np = pytest.importorskip("numpy")
    tok = CharTokenizer.from_text("abc")
    assert tok.decode([np.int64(1), np.int32(0), np.uint8(2)]) == "bac"
    assert tok.decode(np.array([2, 1, 0])) == "cba" == tok.decode(torch.tensor([2, 1, 0]))
    for single in (torch.tensor(1), np.array(1), np.int64(1), 1):
        with pytest.raises(TypeError, match=r"ids must be a \(T,\) sequence of ids, got a single id"):
            tok.decode(single)
    with pytest.raises(TypeError, match=r"ids must be ints, got np.True_ \(bool"):
        tok.decode(np.array([True, False]))
    with pytest.raises(TypeError, match=r"got np.float64\(1.0\) \(float64\)"):
        tok.decode(np.array([1.0]))
    with pytest.raises(ValueError, match="ids must be ints in 0..2, got np.int64\\(3\\)"):
        tok.decode(np.array([0, 3]))


def test_standard_split_sizes():
    tokens = torch.arange(1001)
    train, val = train_val_split(tokens)
    assert len(train) == 900 and len(val) == 101
    assert torch.equal(torch.cat([train, val]), tokens)  # first 90 % train, last 10 % validation
    with pytest.raises(ValueError, match="train_frac"):
        train_val_split(tokens, 1.0)


def test_block_batches_shapes_shift_and_determinism():
    tokens = torch.arange(500)  # token i has id i, so shifts are visible
    batch_fn = block_batches(tokens, block_size=16, batch_size=8, seed=3)
    x, y = batch_fn(5)
    assert x.shape == y.shape == (8, 16) and x.dtype == torch.long
    assert torch.equal(y, x + 1)  # y is x shifted by one token
    assert torch.equal(x, batch_fn(5)[0])  # the same step gives the same batch
    assert not torch.equal(x, batch_fn(6)[0])
    assert not torch.equal(x, block_batches(tokens, 16, 8, seed=4)(5)[0])
    assert int(x.max()) < 499  # the last target exists
    short = block_batches(torch.arange(18), block_size=16, batch_size=8)  # two windows: starts 0 and 1
    assert {int(short(step)[0][i, 0]) for step in range(10) for i in range(8)} == {0, 1}  # the last one too
    with pytest.raises(ValueError, match="block_size"):
        block_batches(tokens, block_size=0, batch_size=8)


def test_split_loss_predicts_every_token_once():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=11, block_size=4, n_layers=1, n_heads=1, d_model=8))
    tokens = torch.randint(0, 11, (10,))
    windows = [tokens[0:5], tokens[4:9], tokens[8:10]]  # 4 + 4 + 1 = 9 predicted tokens
    with torch.no_grad():
        total = sum(
            torch.nn.functional.cross_entropy(model(w[None, :-1])[0], w[1:], reduction="sum") for w in windows
        )
    assert split_loss(model, tokens, block_size=4, batch_size=2) == pytest.approx(float(total) / 9, rel=1e-5)


def test_split_loss_restores_the_training_mode_even_when_it_fails():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=11, block_size=4, n_layers=1, n_heads=1, d_model=8)).train()
    split_loss(model, torch.randint(0, 11, (10,)), block_size=4)
    assert model.training
    with pytest.raises(ValueError, match="ids in 0..10"):
        split_loss(model, torch.tensor([1, 2, 50, 3]), block_size=4)  # id 50 is outside the vocabulary
    assert model.training  # restored in a `finally`, not only on success
    model.eval()
    split_loss(model, torch.randint(0, 11, (10,)), block_size=4)
    assert not model.training


def test_downloaded_file_gets_the_normal_mode(server, tmp_path):
    old = os.umask(0o022)
    try:
        target = download(f"{server}/good", tmp_path / "corpus.txt", CORPUS_SHA)
    finally:
        os.umask(old)
    assert stat.S_IMODE(target.stat().st_mode) == 0o644  # readable by others, like any downloaded file


def test_default_path_follows_the_data_folder(tmp_path, monkeypatch):
    monkeypatch.delenv(shakespeare.PATH_ENV, raising=False)
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path / "elsewhere"))
    assert shakespeare.default_path() == tmp_path / "elsewhere" / "tinyshakespeare.txt"
    monkeypatch.setenv(shakespeare.PATH_ENV, str(tmp_path / "mine.txt"))
    assert shakespeare.default_path() == tmp_path / "mine.txt"  # the file's own variable wins
