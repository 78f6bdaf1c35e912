"""Zero-copy file copies: each method, the fallbacks across filesystems, error attribution."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from jbod_broker.move.copy import CopyIOError, CopyMethod, FileCopier

DATA = os.urandom(3 * 1024 * 1024 + 123)


@pytest.fixture
def src(tmp_path: Path) -> Iterator[int]:
    p = tmp_path / "src"
    p.write_bytes(DATA)
    fd = os.open(p, os.O_RDONLY)
    yield fd
    os.close(fd)


def _dst(path: Path, flags: int = os.O_RDWR) -> int:
    return os.open(path, flags | os.O_CREAT, 0o644)


@pytest.mark.parametrize(
    "method", [CopyMethod.COPY_FILE_RANGE, CopyMethod.SENDFILE, CopyMethod.BUFFERED]
)
def test_each_method_copies_ranges_exactly(src: int, tmp_path: Path, method: CopyMethod) -> None:
    copier = FileCopier([method])
    dst = _dst(tmp_path / "dst")
    try:
        os.pwrite(dst, b"HEAD", 0)
        assert copier.copy(src, dst, 1000, 4, len(DATA) - 1000) == len(DATA) - 1000
        assert copier.bytes_by_method[method] == len(DATA) - 1000
    finally:
        os.close(dst)
    assert (tmp_path / "dst").read_bytes() == b"HEAD" + DATA[1000:]


def test_stops_at_the_end_of_a_truncated_source(src: int, tmp_path: Path) -> None:
    dst = _dst(tmp_path / "dst")
    try:
        assert FileCopier().copy(src, dst, len(DATA) - 10, 0, 1000) == 10
    finally:
        os.close(dst)


def test_across_filesystems_falls_back_from_copy_file_range(src: int, tmp_path: Path) -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("needs /dev/shm on another filesystem than the temporary directory")
    target = shm / f"jbod-move-copy-{os.getpid()}"
    dst = _dst(target)
    try:
        copier = FileCopier()
        assert copier.copy(src, dst, 0, 0, len(DATA)) == len(DATA)
        assert target.read_bytes() == DATA
        # Linux refuses copy_file_range across these filesystems (EXDEV) on current kernels;
        # whichever way, a zero-copy method did the work, never the buffered loop.
        assert copier.bytes_by_method[CopyMethod.BUFFERED] == 0
    finally:
        os.close(dst)
        target.unlink()


def test_buffer_is_at_least_one_mebibyte() -> None:
    assert FileCopier(buffer_size=4096)._buffer_size == 1024 * 1024


def test_a_write_error_is_the_destination(src: int, tmp_path: Path) -> None:
    (tmp_path / "ro").write_bytes(b"")
    dst = os.open(tmp_path / "ro", os.O_RDONLY)
    try:
        for method in CopyMethod:
            with pytest.raises(CopyIOError) as info:
                FileCopier([method]).copy(src, dst, 0, 0, 4096)
            assert info.value.side == "destination", method
    finally:
        os.close(dst)


def test_a_read_error_is_the_source(tmp_path: Path) -> None:
    (tmp_path / "wo").write_bytes(DATA)
    src = os.open(tmp_path / "wo", os.O_WRONLY)
    dst = _dst(tmp_path / "dst")
    try:
        for method in CopyMethod:
            with pytest.raises(CopyIOError) as info:
                FileCopier([method]).copy(src, dst, 0, 0, 4096)
            assert info.value.side == "source", method
    finally:
        os.close(src)
        os.close(dst)
