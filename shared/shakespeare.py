"""tiny Shakespeare for a character-level language model: download, tokenizer, split, batches, loss.

The corpus (about 1.1 MB of plays) is downloaded once into the course's data folder (`shared.files.data_dir()`:
the checkout's `data/`, else a per-user cache folder, or $COURSE_DATA_DIR), checked against its sha256 and
written atomically, so a partial or corrupt file is never used.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from numbers import Integral
from pathlib import Path

import torch
from torch import Tensor, nn

from .files import atomic_write, data_dir, sha256_of
from .runtime import eval_mode
from .validation import check_int, check_positive_int, describe, is_integer_tensor

URL = "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
N_BYTES = 1_115_394
FILE_NAME = "tinyshakespeare.txt"
PATH_ENV = "TINYSHAKESPEARE_PATH"  # set it to use a copy that lies elsewhere


def default_path() -> Path:
    """Where the corpus is looked for and downloaded to: $TINYSHAKESPEARE_PATH, else data_dir()/tinyshakespeare.txt."""
    return Path(os.environ.get(PATH_ENV) or data_dir() / FILE_NAME)


class CorpusError(RuntimeError):
    """The corpus could not be obtained, or a file on disk does not have the expected sha256."""


def _how_to_get(path: Path, url: str, sha256: str) -> str:
    return (
        f"To get the file by hand, download\n  {url}\nand save it as\n  {path}\n"
        f"(or point the environment variable {PATH_ENV} at a copy). Its sha256 must be\n  {sha256}"
    )


def download(url: str, path: str | os.PathLike, sha256: str, timeout: float = 30.0) -> Path:
    """Download `url` to `path` via a temporary file; only a file with the right sha256 replaces `path`."""
    path = Path(path)
    try:
        with atomic_write(path, suffix=".part") as tmp:  # `path` is either absent (or old) or complete
            digest = hashlib.sha256()
            with open(tmp, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as response:
                for chunk in iter(lambda: response.read(1 << 16), b""):
                    digest.update(chunk)
                    out.write(chunk)
            if digest.hexdigest() != sha256:
                raise CorpusError(
                    f"downloaded {tmp.stat().st_size} bytes from {url} but their sha256 is {digest.hexdigest()}, "
                    f"not {sha256} (truncated or changed file); nothing was saved.\n{_how_to_get(path, url, sha256)}"
                )
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as err:  # offline, cut off, ...
        raise CorpusError(f"could not download {url}: {err}\n{_how_to_get(path, url, sha256)}") from err
    return path


def load_tiny_shakespeare(
    path: str | os.PathLike | None = None, *, url: str = URL, sha256: str = SHA256, allow_download: bool = True
) -> str:
    """The corpus as one string. Looks at `path`, else `default_path()` ($TINYSHAKESPEARE_PATH or the data folder).

    A missing file is downloaded from `url` (when `allow_download`); a file whose sha256 differs from
    `sha256` is never used: a CorpusError says what was found and how to get the right file.
    `path` names the file itself: a directory raises ValueError (nothing is guessed inside it, nothing downloaded).
    """
    _check_not_a_directory(path)
    path = Path(path) if path is not None else default_path()
    if not path.is_file():
        if not allow_download:
            raise CorpusError(f"{path} does not exist and allow_download=False.\n{_how_to_get(path, url, sha256)}")
        download(url, path, sha256)
    found = sha256_of(path)
    if found != sha256:
        raise CorpusError(
            f"{path} has sha256 {found}, expected {sha256}: the file is partial or corrupt and is not used. "
            f"Delete it to download it again.\n{_how_to_get(path, url, sha256)}"
        )
    return path.read_text(encoding="utf-8")


def _check_not_a_directory(path) -> None:
    """`path` (or, when None, $TINYSHAKESPEARE_PATH) must name the corpus file, not a folder."""
    name, where = ("path", Path(path)) if path is not None else (PATH_ENV, default_path())
    if where.is_dir():
        raise ValueError(f"{name} must name the corpus file, not a directory: {where} is a directory. Pass the file "
                         f"itself, e.g. {where / FILE_NAME} (where it is downloaded to if missing)")


class CharTokenizer:
    """One id per character: encode(str) -> (T,) int64 ids, decode(ids) -> str; ids follow sorted order."""

    def __init__(self, chars: Iterable[str]) -> None:
        self.chars = "".join(sorted(set(chars)))
        if not self.chars:
            raise ValueError("chars must contain at least one character")
        self.stoi = {ch: i for i, ch in enumerate(self.chars)}

    @classmethod
    def from_text(cls, text: str) -> CharTokenizer:
        """The vocabulary is every distinct character of `text`."""
        return cls(text)

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> Tensor:
        """str -> (T,) int64 tensor; a character outside the vocabulary raises ValueError naming it."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        try:
            return torch.tensor([self.stoi[ch] for ch in text], dtype=torch.long)
        except KeyError as err:
            ch = err.args[0]
            raise ValueError(
                f"character {ch!r} (at position {text.index(ch)}) is not in the tokenizer's vocabulary "
                f"of {self.vocab_size} characters"
            ) from None

    def decode(self, ids: Tensor | Iterable[int]) -> str:
        """(T,) ids (tensor, numpy array or list of ints, numpy ints too) -> str; a non-int id (a bool too) raises
        TypeError, one outside 0..vocab_size-1 ValueError. A single id (a 0-d tensor or a bare int) raises
        TypeError rather than decoding one character: it is more often a reduction over the wrong dimension."""
        if isinstance(ids, Integral) or getattr(ids, "ndim", None) == 0:
            raise TypeError(f"ids must be a (T,) sequence of ids, got a single id {ids!r}; "
                            "for one character pass a list: decode([i])")
        ids = ids.tolist() if isinstance(ids, Tensor) else list(ids)
        wrong_type = [i for i in ids if not isinstance(i, Integral) or isinstance(i, bool)]  # a bool reads as 1 or 0
        if wrong_type:
            raise TypeError(f"ids must be ints, got {wrong_type[0]!r} ({type(wrong_type[0]).__name__})")
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(f"ids must be ints in 0..{self.vocab_size - 1}, got {bad[0]!r}")
        return "".join(self.chars[int(i)] for i in ids)


def train_val_split(tokens: Tensor, train_frac: float = 0.9) -> tuple[Tensor, Tensor]:
    """The standard split: the first 90 % of the (N,) tokens for training, the last 10 % for validation.

    Both splits must hold at least one token: a train_frac that leaves either empty raises ValueError.
    """
    if not is_integer_tensor(tokens) or tokens.dim() != 1:
        raise ValueError(f"tokens must be a 1-D integer tensor of token ids, got {describe(tokens)}")
    if isinstance(train_frac, bool) or not isinstance(train_frac, (int, float)) or not 0.0 < train_frac < 1.0:
        raise ValueError(f"train_frac must be a number in (0, 1), got {train_frac!r}")
    n_train = int(train_frac * len(tokens))
    if not 0 < n_train < len(tokens):
        raise ValueError(f"train_frac={train_frac} of {len(tokens)} tokens gives {n_train} training tokens and "
                         f"{len(tokens) - n_train} validation tokens: both splits must be non-empty")
    return tokens[:n_train], tokens[n_train:]


def block_batches(
    tokens: Tensor, block_size: int, batch_size: int, seed: int = 0, device: torch.device | str | None = None
) -> Callable[[int], tuple[Tensor, Tensor]]:
    """batch_fn(step) -> (x, y), each (batch_size, block_size); y is x shifted by one token.

    Block starts are drawn with a torch.Generator seeded from (seed, step): the same step always gives
    the same batch, so a resumed run sees exactly the batches of the uninterrupted one.
    """
    check_positive_int("block_size", block_size)
    check_positive_int("batch_size", batch_size)
    check_int("seed", seed, minimum=0)
    if not is_integer_tensor(tokens) or tokens.dim() != 1 or len(tokens) < block_size + 1:
        raise ValueError(f"tokens must be a 1-D integer tensor of ids longer than block_size={block_size}, "
                         f"got {describe(tokens)}")
    offsets = torch.arange(block_size + 1)  # (block_size + 1,)

    def batch_fn(step: int) -> tuple[Tensor, Tensor]:
        generator = torch.Generator().manual_seed((seed * 1_000_003 + step) % (2**63))
        starts = torch.randint(len(tokens) - block_size, (batch_size,), generator=generator)  # (B,)
        chunk = tokens[starts[:, None] + offsets]  # (B, block_size + 1)
        return chunk[:, :-1].to(device), chunk[:, 1:].to(device)  # (B, block_size) each

    return batch_fn


@torch.no_grad()
def split_loss(model: nn.Module, tokens: Tensor, block_size: int, batch_size: int = 32) -> float:
    """Mean next-token cross-entropy over a whole (N,) split: every token after the first predicted once.

    The split is cut into windows of block_size + 1 tokens that overlap by one, so each window
    predicts block_size new tokens (the last window may be shorter).
    """
    check_positive_int("block_size", block_size)
    check_positive_int("batch_size", batch_size)
    if not is_integer_tensor(tokens) or tokens.dim() != 1 or len(tokens) < 2:
        raise ValueError(f"tokens must be a 1-D integer tensor of at least 2 ids, got {describe(tokens)}")
    device = next(model.parameters()).device
    starts = list(range(0, len(tokens) - 1, block_size))
    total, count = 0.0, 0
    with eval_mode(model):  # back in its previous mode afterwards, even if a batch raises
        for i in range(0, len(starts), batch_size):
            windows = [tokens[s : s + block_size + 1] for s in starts[i : i + batch_size]]
            by_length: dict[int, list[Tensor]] = {}
            for w in windows:
                by_length.setdefault(len(w), []).append(w)
            for group in by_length.values():
                chunk = torch.stack(group).to(device)  # (b, T + 1)
                logits = model(chunk[:, :-1])  # (b, T, vocab_size)
                loss = nn.functional.cross_entropy(logits.flatten(0, 1), chunk[:, 1:].flatten(), reduction="sum")
                total, count = total + float(loss), count + chunk[:, 1:].numel()
    return total / count
