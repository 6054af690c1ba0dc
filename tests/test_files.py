"""shared.files: the data folder (checkout, user cache, environment variable) and atomic writes."""

import errno
import os

import pytest

from shared import files
from shared.files import atomic_write, data_dir


def test_data_dir_is_the_checkout_data_folder_else_a_user_cache(tmp_path, monkeypatch):
    monkeypatch.delenv(files.DATA_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    checkout = tmp_path / "clone"
    (checkout / "data").mkdir(parents=True)
    (checkout / "pyproject.toml").write_text("")
    monkeypatch.setattr(files, "CHECKOUT", checkout)
    assert data_dir() == checkout / "data"
    installed = tmp_path / "site-packages"  # an installed package: no pyproject.toml beside it
    (installed / "data").mkdir(parents=True)
    monkeypatch.setattr(files, "CHECKOUT", installed)
    assert data_dir() == tmp_path / "cache" / "transformers-course"
    monkeypatch.setenv(files.DATA_DIR_ENV, str(tmp_path / "mine"))
    assert data_dir() == tmp_path / "mine"


def test_atomic_write_replaces_only_on_success(tmp_path):
    target = tmp_path / "sub" / "file.txt"
    with atomic_write(target) as tmp:
        assert tmp.parent == target.parent and tmp.exists() and not target.exists()
        tmp.write_text("new")
    assert target.read_text() == "new"
    with pytest.raises(RuntimeError, match="stop"), atomic_write(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("stop")
    assert target.read_text() == "new" and sorted(p.name for p in target.parent.iterdir()) == ["file.txt"]


def test_a_full_disk_is_named_and_the_old_file_survives(tmp_path):
    target = tmp_path / "file.txt"
    target.write_text("old")
    with pytest.raises(OSError, match=f"no space left while writing {target}") as err, atomic_write(target) as tmp:
        tmp.write_text("ha")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert err.value.errno == errno.ENOSPC and isinstance(err.value.__cause__, OSError)
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["file.txt"]
    with pytest.raises(PermissionError), atomic_write(target):  # any other OSError passes through unchanged
        raise PermissionError(errno.EACCES, "denied")
