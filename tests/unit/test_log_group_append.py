"""Group commit in the log: several produce requests appended with one write.

Real files in a temporary directory; the count of writes is taken by wrapping the active
segment's ``append`` (the unit tier may look inside).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jbod_broker.storage.diskio import LogDirFailureChannel
from jbod_broker.storage.errors import CorruptRecordError, InvalidRecordError, StorageError
from jbod_broker.storage.log import AppendInfo, Log, LogConfig
from jbod_broker.storage.names import TopicPartition
from jbod_broker.storage.records import build_batch, decode_batch, iter_batches

TP = TopicPartition("g", 0)


def make_log(tmp_path: Path, **cfg: int) -> Log:
    return Log.create(
        str(tmp_path / "g-0"), TP, LogConfig(**cfg), LogDirFailureChannel(), log_dir=str(tmp_path)
    )


def request(i: int, batches: int = 1, records: int = 3) -> bytes:
    return b"".join(
        build_batch([(b"r%d-%d-%d" % (i, b, j), b"v%d" % i) for j in range(records)])
        for b in range(batches)
    )


def keys_in(log: Log) -> list[bytes]:
    data = log.read(0, 1 << 24).data
    out: list[bytes] = []
    for pos, _ in iter_batches(data):
        out += [r.key or b"" for r in decode_batch(data, pos)[1]]
    return out


def count_writes(log: Log, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    sizes: list[int] = []
    seg = log.active
    original = seg.append

    def counted(data: bytes | bytearray | memoryview, metas: list[tuple[int, int, int]]) -> None:
        sizes.append(len(data))
        original(data, metas)

    monkeypatch.setattr(seg, "append", counted)
    return sizes


def test_group_gets_consecutive_offsets_and_one_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = make_log(tmp_path)
    log.append_as_leader(request(0), 3)  # offsets 0-2
    writes = count_writes(log, monkeypatch)
    reqs = [request(1), request(2, batches=2), request(3, records=5)]
    results = log.append_as_leader_group(reqs, 4)
    assert writes == [sum(len(r) for r in reqs)]
    assert all(isinstance(r, AppendInfo) for r in results)
    spans = [(r.first_offset, r.last_offset, r.batch_count) for r in results]  # type: ignore[union-attr]
    assert spans == [(3, 5, 1), (6, 11, 2), (12, 16, 1)]
    assert [r.size_in_bytes for r in results] == [len(r) for r in reqs]  # type: ignore[union-attr]
    assert log.log_end_offset == 17
    assert keys_in(log)[3:] == [
        *(b"r1-0-%d" % j for j in range(3)),
        *(b"r2-%d-%d" % (b, j) for b in range(2) for j in range(3)),
        *(b"r3-0-%d" % j for j in range(5)),
    ]
    data = log.read(3, 1 << 20).data
    epochs = [h.partition_leader_epoch for _, h in iter_batches(data)]
    assert epochs == [4, 4, 4, 4]
    assert log.epochs.end_offset_for(3, 17)[1] == 3  # epoch 4 starts at the group's first offset


@pytest.mark.parametrize("where", [0, 1, 2])
def test_a_bad_request_fails_alone(tmp_path: Path, where: int) -> None:
    log = make_log(tmp_path)
    good = [request(i) for i in range(3)]
    bad = bytearray(good[where])
    bad[-1] ^= 0xFF  # the CRC no longer matches
    reqs: list[bytes | bytearray] = list(good)
    reqs[where] = bad
    results = log.append_as_leader_group(reqs, 0)
    assert isinstance(results[where], CorruptRecordError)
    ok = [r for i, r in enumerate(results) if i != where]
    assert [(r.first_offset, r.last_offset) for r in ok] == [(0, 2), (3, 5)]  # type: ignore[union-attr]
    assert log.log_end_offset == 6
    assert b"r%d-0-0" % where not in keys_in(log)


def test_all_bad_changes_nothing(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    log.append_as_leader(request(0), 0)
    size = log.size
    results = log.append_as_leader_group([b"", b"\x00" * 70], 1)
    assert all(isinstance(r, StorageError) for r in results)
    assert isinstance(results[0], InvalidRecordError)
    assert (log.log_end_offset, log.size, log.epochs.latest_epoch) == (3, size, 0)


def test_single_request_raises_as_before(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(b"", 0)
    assert log.log_end_offset == 0


def test_group_rolls_like_one_append(tmp_path: Path) -> None:
    """A group that does not fit the active segment rolls first and lands whole in the next."""
    reqs = [build_batch([(b"r%d-%d" % (i, j), b"x" * 100) for j in range(12)]) for i in range(3)]
    log = make_log(tmp_path, segment_bytes=len(reqs[0]) * 2)
    first = log.append_as_leader_group(reqs[:1], 0)
    assert isinstance(first[0], AppendInfo)
    rest = log.append_as_leader_group(reqs[1:], 0)
    assert all(isinstance(r, AppendInfo) for r in rest)
    assert [s.base_offset for s in log.segments] == [0, 12]
    assert log.segments[1].size == len(reqs[1]) + len(reqs[2])
    assert log.log_end_offset == 36


def test_a_lone_bytearray_handed_over_is_stamped_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 14: a produce body is held once (what the request-memory pool reserved), not
    copied for its offsets; without ``in_place`` the caller's buffer is left as it was."""
    log = make_log(tmp_path)
    log.append_as_leader(request(0), 1)  # offsets 0-2
    kept = bytearray(request(1))
    before = bytes(kept)
    log.append_as_leader_group([kept], 2)
    assert kept == before, "a buffer not handed over was changed"
    given = bytearray(request(2))
    seen: list[object] = []
    original = log.active.append

    def same_object(
        data: bytes | bytearray | memoryview, metas: list[tuple[int, int, int]]
    ) -> None:
        seen.append(data)
        original(data, metas)

    monkeypatch.setattr(log.active, "append", same_object)
    (info,) = log.append_as_leader_group([given], 2, in_place=True)
    assert isinstance(info, AppendInfo) and (info.first_offset, info.last_offset) == (6, 8)
    assert len(seen) == 1 and seen[0] is given, "the body was copied"
    _, header = next(iter_batches(bytes(given)))
    assert (header.base_offset, header.partition_leader_epoch) == (6, 2)
    assert keys_in(log)[6:] == [b"r2-0-0", b"r2-0-1", b"r2-0-2"]
