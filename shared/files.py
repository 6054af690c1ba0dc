"""Files the course writes: atomic replacement (checkpoints, downloads) and the folder downloads land in."""

from __future__ import annotations

import errno
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
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
