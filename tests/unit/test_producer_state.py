"""Idempotent producer rules and Kafka's producer snapshot format (pure: no files)."""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import given
from hypothesis import strategies as st

from jbod_broker.storage.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from jbod_broker.storage.producer_state import (
    BATCHES_TO_RETAIN,
    MAX_SEQUENCE,
    BatchMetadata,
    CorruptSnapshotError,
    ProducerEntry,
    ProducerStateManager,
    check_append,
    decode_snapshot,
    decrement_sequence,
    encode_snapshot,
    increment_sequence,
    is_expired,
    with_batch,
)

PID = 4000
WHERE = "t-0 at 0"


def _entry(*ranges: tuple[int, int], epoch: int = 0, offset: int = 100) -> ProducerEntry:
    """An entry after batches with these (first_seq, last_seq) ranges, at consecutive offsets."""
    e = ProducerEntry(PID)
    for first, last in ranges:
        delta = (last - first) % (MAX_SEQUENCE + 1)
        e = with_batch(e, epoch, last, offset + delta, delta, 1000)
        offset += delta + 1
    return e


def _five() -> ProducerEntry:
    return _entry((0, 9), (10, 19), (20, 29), (30, 39), (40, 49))


# -- sequence rules -----------------------------------------------------------------------


def test_first_batch_of_an_unknown_producer_is_accepted_at_any_sequence() -> None:
    # Kafka 4.x (KIP-360): the state may be gone (retention, expiration): no UNKNOWN_PRODUCER_ID
    assert check_append(None, 0, 0, 4, WHERE) is None
    assert check_append(None, 3, 17, 20, WHERE) is None


def test_in_order_batch_is_accepted() -> None:
    assert check_append(_entry((0, 4)), 0, 5, 9, WHERE) is None


@pytest.mark.parametrize("which", range(BATCHES_TO_RETAIN))
def test_a_duplicate_of_each_of_the_last_five_batches_is_found_with_its_offsets(
    which: int,
) -> None:
    e = _five()
    dup = check_append(e, 0, which * 10, which * 10 + 9, WHERE)
    assert dup == e.batches[which]
    assert dup is not None
    assert (dup.first_offset, dup.last_offset) == (100 + which * 10, 109 + which * 10)


def test_a_batch_older_than_the_last_five_is_out_of_order() -> None:
    e = with_batch(_five(), 0, 59, 159, 9, 1000)  # a sixth: the first one is forgotten
    assert len(e.batches) == BATCHES_TO_RETAIN
    with pytest.raises(OutOfOrderSequenceError, match="expected 60"):
        check_append(e, 0, 0, 9, WHERE)


def test_a_same_start_with_another_length_is_not_a_duplicate() -> None:
    with pytest.raises(OutOfOrderSequenceError):
        check_append(_entry((0, 9)), 0, 0, 4, WHERE)


def test_a_gap_is_out_of_order() -> None:
    with pytest.raises(OutOfOrderSequenceError, match="sent sequence 7, expected 5"):
        check_append(_entry((0, 4)), 0, 7, 9, WHERE)


def test_an_epoch_bump_must_restart_at_sequence_zero() -> None:
    e = _entry((0, 4))
    assert check_append(e, 1, 0, 3, WHERE) is None
    with pytest.raises(OutOfOrderSequenceError, match="new epoch 1 at sequence 5"):
        check_append(e, 1, 5, 9, WHERE)


def test_an_epoch_bump_forgets_the_old_epochs_batches() -> None:
    e = with_batch(_entry((0, 4)), 1, 2, 200, 2, 1000)
    assert e.epoch == 1
    assert [b.last_seq for b in e.batches] == [2]
    # the old epoch's batch is no duplicate any more: the old epoch is fenced
    with pytest.raises(InvalidProducerEpochError, match="older than its current epoch 1"):
        check_append(e, 0, 0, 4, WHERE)


def test_a_fenced_epoch_is_refused() -> None:
    e = _entry((0, 4), epoch=5)
    with pytest.raises(InvalidProducerEpochError):
        check_append(e, 4, 5, 9, WHERE)


def test_the_sequence_wraps_after_int32_max() -> None:
    e = _entry((MAX_SEQUENCE - 4, MAX_SEQUENCE))
    assert check_append(e, 0, 0, 4, WHERE) is None
    with pytest.raises(OutOfOrderSequenceError):
        check_append(e, 0, 1, 4, WHERE)
    # a batch that crosses the wrap: first MAX-1, last 2 (five records)
    assert increment_sequence(MAX_SEQUENCE - 1, 4) == 2
    crossing = _entry((MAX_SEQUENCE - 1, 2))
    assert crossing.batches[0].first_seq == MAX_SEQUENCE - 1
    assert check_append(crossing, 0, MAX_SEQUENCE - 1, 2, WHERE) == crossing.batches[0]
    assert check_append(crossing, 0, 3, 3, WHERE) is None


def test_an_entry_without_batches_expects_sequence_zero_in_its_epoch() -> None:
    e = ProducerEntry(PID, epoch=2)  # as a snapshot without a last batch loads
    assert check_append(e, 2, 0, 0, WHERE) is None
    with pytest.raises(OutOfOrderSequenceError):
        check_append(e, 2, 1, 1, WHERE)


@given(st.integers(0, MAX_SEQUENCE), st.integers(0, MAX_SEQUENCE))
def test_increment_and_decrement_are_inverse(seq: int, delta: int) -> None:
    up = increment_sequence(seq, delta)
    assert 0 <= up <= MAX_SEQUENCE
    assert up == (seq + delta) % (MAX_SEQUENCE + 1)
    assert decrement_sequence(up, delta) == seq


@given(st.lists(st.integers(1, 50), min_size=1, max_size=30), st.data())
def test_a_retry_of_any_of_the_last_five_is_a_duplicate_and_the_next_is_in_order(
    sizes: list[int], data: st.DataObject
) -> None:
    e = ProducerEntry(PID)
    seq, offset, sent = 0, 0, []
    for n in sizes:
        last = increment_sequence(seq, n - 1)
        assert check_append(e, 0, seq, last, WHERE) is None
        e = with_batch(e, 0, last, offset + n - 1, n - 1, 0)
        sent.append((seq, last, offset))
        seq, offset = increment_sequence(last, 1), offset + n
    i = data.draw(st.integers(0, len(sent) - 1))
    first, last, off = sent[i]
    verdict = (
        check_append(e, 0, first, last, WHERE) if i >= len(sent) - BATCHES_TO_RETAIN else "old"
    )
    if verdict != "old":
        assert isinstance(verdict, BatchMetadata)
        assert verdict.first_offset == off
    else:
        with pytest.raises(OutOfOrderSequenceError):
            check_append(e, 0, first, last, WHERE)


def test_expiry_follows_the_last_timestamp() -> None:
    e = with_batch(ProducerEntry(PID), 0, 0, 0, 0, 1_000)
    assert not is_expired(e, 1_999, 1_000)
    assert is_expired(e, 2_000, 1_000)
    m = ProducerStateManager("/nonexistent")
    m.update({PID: e})
    m.remove_expired(2_000, 1_000)
    assert m.entry(PID) is None


# -- the snapshot codec -------------------------------------------------------------------


def test_snapshot_layout_is_kafkas_field_by_field() -> None:
    """Kafka's ProducerSnapshot.json v1 (storage/src/main/resources/message) written by
    ProducerStateManager.writeSnapshot: a version-prefixed, non-flexible message."""
    e = with_batch(ProducerEntry(0x0102030405060708), 3, 41, 1_000, 9, 1_700_000_000_123)
    data = encode_snapshot([e, ProducerEntry(7, epoch=2, last_timestamp=55)])
    entries = (
        struct.pack(">q", 7)  # ProducerId int64 (sorted by id here; Kafka: map order)
        + struct.pack(">h", 2)  # Epoch int16
        + struct.pack(">i", -1)  # LastSequence int32: none
        + struct.pack(">q", -1)  # LastOffset int64: none
        + struct.pack(">i", 0)  # OffsetDelta int32
        + struct.pack(">q", 55)  # Timestamp int64
        + struct.pack(">i", -1)  # CoordinatorEpoch int32: no marker seen
        + struct.pack(">q", -1)  # CurrentTxnFirstOffset int64: no open transaction
        + struct.pack(">q", 0x0102030405060708)
        + struct.pack(">h", 3)
        + struct.pack(">i", 41)
        + struct.pack(">q", 1_000)
        + struct.pack(">i", 9)
        + struct.pack(">q", 1_700_000_000_123)
        + struct.pack(">i", -1)
        + struct.pack(">q", -1)
    )
    counted = struct.pack(">i", 2) + entries  # ProducerEntries: int32 length, then the entries
    crc = crc32c.crc32c(counted)  # CRC-32C of everything after the version and the CRC
    assert data == struct.pack(">h", 1) + struct.pack(">I", crc) + counted
    assert len(data) == 2 + 4 + 4 + 2 * 46


def test_snapshot_round_trip_keeps_the_last_batch_of_each_producer() -> None:
    a = _five()
    b = with_batch(ProducerEntry(9), 1, MAX_SEQUENCE, 5, 0, -1)
    got = decode_snapshot(encode_snapshot([a, b]), "x")
    assert got == [
        ProducerEntry(9, 1, (b.batches[-1],), -1),
        ProducerEntry(PID, 0, (a.batches[-1],), a.last_timestamp),
    ]
    assert decode_snapshot(encode_snapshot([]), "x") == []


@given(
    st.lists(
        st.tuples(
            st.integers(0, 2**63 - 1),
            st.integers(0, 2**15 - 1),
            st.integers(0, MAX_SEQUENCE),
            st.integers(0, 2**62),
            st.integers(0, 2**31 - 1),
            st.integers(-1, 2**62),
        ),
        unique_by=lambda t: t[0],
        max_size=20,
    )
)
def test_snapshot_round_trip_property(rows: list[tuple[int, int, int, int, int, int]]) -> None:
    entries = [
        with_batch(ProducerEntry(pid), ep, seq, off, delta, ts)
        for pid, ep, seq, off, delta, ts in rows
    ]
    assert decode_snapshot(encode_snapshot(entries), "x") == sorted(
        entries, key=lambda e: e.producer_id
    )


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d[:-1],  # torn
        lambda d: d[:3],  # shorter than the header
        lambda d: b"\x00\x02" + d[2:],  # unknown version
        lambda d: d[:-1] + bytes([d[-1] ^ 1]),  # a flipped bit: the CRC
        lambda d: d + b"\x00",  # trailing garbage
        lambda d: b"",
    ],
)
def test_a_damaged_snapshot_is_refused(damage: object) -> None:
    data = encode_snapshot([_five()])
    assert callable(damage)
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(damage(data), "snap")
