"""The failure channel's answer to a full disk, and the write helpers that must not lie about it.

A full disk takes a directory offline like any I/O error (KIP-112), unless the caller asked to
answer it itself (start-up dropping a redundant ``-future`` copy). Short writes are resumed, so
a nearly full disk raises instead of losing bytes silently.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from jbod_broker.storage import diskio
from jbod_broker.storage.diskio import (
    LogDirFailureChannel,
    is_space_error,
    pwrite_all,
    write_or_remove,
)
from jbod_broker.storage.errors import KafkaStorageError


def enospc(*_args: object, **_kwargs: object) -> int:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (OSError(errno.ENOSPC, "full"), True),
        (OSError(errno.EDQUOT, "quota"), True),
        (OSError(errno.EIO, "io"), False),
        (PermissionError(errno.EACCES, "denied"), False),
        (OSError("no errno"), False),
        (ValueError("not an OSError"), False),
    ],
)
def test_is_space_error(error: BaseException, expected: bool) -> None:
    assert is_space_error(error) is expected


def test_a_full_disk_takes_the_directory_offline_by_default() -> None:
    channel = LogDirFailureChannel()
    full = "offline: append: No space left on device"
    with pytest.raises(KafkaStorageError, match=full), channel.guard("/d", "append"):
        enospc()
    channel.drain()
    assert channel.is_offline("/d")


def test_pwrite_all_resumes_short_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.pwrite
    calls: list[int] = []

    def short(fd: int, data: bytes, pos: int) -> int:
        calls.append(pos)
        return real(fd, bytes(data[:3]), pos)

    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    try:
        monkeypatch.setattr(os, "pwrite", short)
        pwrite_all(fd, b"0123456789", 5)
        monkeypatch.undo()
        assert os.pread(fd, 20, 0) == b"\x00" * 5 + b"0123456789"
        assert calls == [5, 8, 11, 14]
    finally:
        os.close(fd)


def test_write_or_remove_writes_when_there_is_room(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_bytes(b"old")
    assert write_or_remove(str(path), b"new") is True
    assert path.read_bytes() == b"new"
    assert sorted(os.listdir(tmp_path)) == ["leader-epoch-checkpoint"]


def test_write_or_remove_removes_the_stale_file_on_a_full_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_bytes(b"old")
    monkeypatch.setattr(os, "write", enospc)
    assert write_or_remove(str(path), b"new") is False
    assert os.listdir(tmp_path) == []  # neither the stale file nor the half-written one


def test_write_or_remove_raises_other_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_bytes(b"old")

    def eio(*_args: object) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(diskio, "write_atomically", eio)
    with pytest.raises(OSError, match="Input/output error"):
        write_or_remove(str(path), b"new")
    assert path.read_bytes() == b"old"
