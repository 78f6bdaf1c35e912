"""Idempotent producers' state per replica (Kafka's ``ProducerStateManager`` and its files).

Kafka's idempotent producer (the Java client's default) numbers its batches per partition; the
leader keeps, per producer id, the epoch and the sequence and offset ranges of the producer's
last five batches, so that a batch sent again (the producer did not see the answer) is answered
with the offsets it already has instead of being written twice, a batch after a gap is refused
(OUT_OF_ORDER_SEQUENCE_NUMBER) and a batch of a fenced epoch is refused
(INVALID_PRODUCER_EPOCH). Followers rebuild the same state from the batches they replicate,
so a new leader after a failover de-duplicates as the old one did.

The state survives restarts through Kafka's ``<offset>.snapshot`` files beside the segments: a
snapshot named ``N`` holds the state of every producer after the batches below offset ``N``.
They are written when a segment rolls (at the new segment's base offset) and at a clean
shutdown (at the log end); at start the latest one at or below the log end is read and the
batches after it are replayed, and a truncation drops the snapshots past its point and replays
the same way. A snapshot is deleted with the segment of the same base offset (retention).

This module is in three parts:

* the rules (pure): :func:`check_append` decides what a leader does with one batch of a
  producer (append, answer as a duplicate, or refuse), :func:`check_group` applies it to a
  group of requests written together, :func:`with_batch` is the entry after
  a batch, the sequence arithmetic wraps at 2^31-1 as Kafka's does;
* the snapshot codec (pure): :func:`encode_snapshot` and :func:`decode_snapshot`, Kafka's
  ``ProducerSnapshot`` version 1 byte for byte (see :data:`SNAPSHOT_ENTRY`);
* :class:`ProducerStateManager`, the mutable map a log keeps under its lock, and the file
  helpers (:func:`list_snapshots`, :func:`read_snapshot_file`, :func:`write_snapshot_file`,
  :func:`delete_snapshot_file`). They raise ``OSError`` as it comes: the owning
  :class:`~jbod_broker.storage.log.Log` calls them inside its directory's failure guard, so a
  failing disk is a disk failure (KIP-112) like any other write of the replica.

Transactions (control batches, ``CurrentTxnFirstOffset``, coordinator epochs) are not handled
yet: control batches are skipped, and snapshots carry Kafka's "none" values for those fields.

Thread-safety: the functions are pure; a :class:`ProducerStateManager` is guarded by its
log's lock.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Final

import crc32c

from .diskio import write_atomically
from .errors import (
    CorruptRecordError,
    DuplicateSequenceError,
    InvalidProducerEpochError,
    InvalidRecordError,
    OutOfOrderSequenceError,
    StorageError,
)
from .names import parse_snapshot_file, snapshot_file_name
from .records import NO_PRODUCER_EPOCH, NO_SEQUENCE, NO_TIMESTAMP, BatchHeader

MAX_SEQUENCE: Final = 2**31 - 1
"""Sequences are int32 and wrap from here to 0 (Kafka's ``DefaultRecordBatch``)."""

BATCHES_TO_RETAIN: Final = 5
"""Batches remembered per producer: the Java client keeps at most five requests in flight
per connection (``max.in.flight.requests.per.connection`` must be <= 5 with idempotence), so
any batch it may send again is among the last five it sent."""

PRODUCER_ID_EXPIRATION_MS: Final = 24 * 3600 * 1000
"""Kafka's ``producer.id.expiration.ms`` default: a producer unheard of for a day is
forgotten (its last batch's timestamp is the measure, as in Kafka), so the map does not grow
with every producer that ever wrote."""

SNAPSHOT_VERSION: Final = 1

_SNAPSHOT_HEADER: Final = struct.Struct(">hIi")
"""Version (int16), CRC (uint32), number of entries (int32; the array of a non-flexible
message version)."""

_CRC_START: Final = 6
"""The CRC-32C covers everything after the version and the CRC itself, from the entry count
on (Kafka's ``PRODUCER_ENTRIES_OFFSET``)."""

SNAPSHOT_ENTRY: Final = struct.Struct(">qhiqiqiq")
"""One producer, the fields of Kafka's ``ProducerSnapshot.json`` v1 in order, big-endian:
ProducerId int64, Epoch int16, LastSequence int32, LastOffset int64, OffsetDelta int32
(last minus first offset of the last batch), Timestamp int64 (the last batch's max
timestamp), CoordinatorEpoch int32 (-1: no transaction marker seen), CurrentTxnFirstOffset
int64 (-1: no transaction open). 46 bytes."""


class CorruptSnapshotError(CorruptRecordError):
    """A snapshot file that fails its version, length or CRC check: it is deleted and the
    state is rebuilt from an older snapshot or from the log, as Kafka does."""


# -- sequence arithmetic ------------------------------------------------------------------


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment`` in Kafka's int32 sequence space (wraps to 0 after 2^31-1)."""
    if sequence > MAX_SEQUENCE - increment:
        return increment - (MAX_SEQUENCE - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    """``sequence - decrement`` in the same space (the inverse of :func:`increment_sequence`)."""
    if sequence < decrement:
        return MAX_SEQUENCE - (decrement - sequence) + 1
    return sequence - decrement


def in_sequence(last_seq: int, next_seq: int) -> bool:
    """Whether ``next_seq`` directly follows ``last_seq`` (0 follows 2^31-1)."""
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == MAX_SEQUENCE)


# -- entries ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """What is remembered of one appended batch (Kafka's ``BatchMetadata``)."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(frozen=True, slots=True)
class ProducerEntry:
    """One producer's state: its epoch and its last batches, oldest first (immutable, so a
    move can hand the whole map to the new log without copying entries)."""

    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    batches: tuple[BatchMetadata, ...] = ()
    last_timestamp: int = NO_TIMESTAMP
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1


def with_batch(
    entry: ProducerEntry, epoch: int, last_seq: int, last_offset: int, offset_delta: int, ts: int
) -> ProducerEntry:
    """The entry after a batch: a new epoch forgets the old epoch's batches; at most
    :data:`BATCHES_TO_RETAIN` are kept."""
    kept = entry.batches if epoch == entry.epoch else ()
    batch = BatchMetadata(last_seq, last_offset, offset_delta, ts)
    return replace(
        entry,
        epoch=epoch,
        batches=(*kept, batch)[-BATCHES_TO_RETAIN:],
        last_timestamp=ts,
    )


def find_duplicate(
    entry: ProducerEntry | None, epoch: int, first_seq: int, last_seq: int
) -> BatchMetadata | None:
    """The remembered batch with exactly this epoch and sequence range, if any."""
    if entry is None or epoch != entry.epoch:
        return None
    for b in entry.batches:
        if b.last_seq == last_seq and b.first_seq == first_seq:
            return b
    return None


def check_sequence(entry: ProducerEntry | None, epoch: int, first_seq: int, where: str) -> None:
    """Kafka's leader checks for a batch that is not a duplicate (``ProducerAppendInfo``).

    * an epoch below the producer's: INVALID_PRODUCER_EPOCH (a fenced, older incarnation);
    * a new (higher) epoch must start at sequence 0;
    * the same epoch must continue at the last sequence + 1 (wrapping);
    * a producer id this replica does not know (Kafka 4.x, KIP-360: its state may have been
      removed by retention or expiration) is accepted at any sequence, as is a known
      producer with no epoch yet.

    Raises :class:`InvalidProducerEpochError` or :class:`OutOfOrderSequenceError`; ``where``
    names the partition and offset for the message.
    """
    if entry is None or entry.epoch == NO_PRODUCER_EPOCH:
        return
    if epoch < entry.epoch:
        raise InvalidProducerEpochError(
            f"{where}: producer {entry.producer_id} sent epoch {epoch}, older than its current "
            f"epoch {entry.epoch} (fenced)"
        )
    if epoch != entry.epoch:
        if first_seq != 0:
            raise OutOfOrderSequenceError(
                f"{where}: producer {entry.producer_id} starts its new epoch {epoch} at sequence "
                f"{first_seq}; a new epoch starts at 0"
            )
        return
    if not in_sequence(entry.last_seq, first_seq):
        raise OutOfOrderSequenceError(
            f"{where}: producer {entry.producer_id} epoch {epoch} sent sequence {first_seq}, "
            f"expected {increment_sequence(entry.last_seq, 1)} (last appended {entry.last_seq})"
        )


def check_append(
    entry: ProducerEntry | None, epoch: int, first_seq: int, last_seq: int, where: str
) -> BatchMetadata | None:
    """What a leader does with one producer batch: the remembered batch it duplicates (answer
    with its offsets, write nothing), else ``None`` once :func:`check_sequence` accepted it."""
    dup = find_duplicate(entry, epoch, first_seq, last_seq)
    if dup is not None:
        return dup
    check_sequence(entry, epoch, first_seq, where)
    return None


def check_group(
    known: Callable[[int], ProducerEntry | None],
    valid: list[tuple[int, list[BatchHeader]]],
    offset: int,
    *,
    where: str,
    log_start_offset: int,
) -> tuple[list[tuple[int, list[BatchHeader]]], dict[int, ProducerEntry], dict[int, StorageError]]:
    """A leader's producer checks for a group of requests (each its index and batch
    headers) to be written from ``offset``, in order, against the state as it will be after
    the requests before (two in-flight requests of one producer can share a group); ``known``
    is the producer's entry now (``ProducerStateManager.entry``), ``where`` the replica.

    Returns the requests to write, the producers' new entries once they are written, and
    the refused ones' errors: a request holding a duplicate batch gets a
    :class:`DuplicateSequenceError` carrying that batch's original offsets (Kafka answers
    the whole request with them), a gap or a fenced epoch its error. Pure: the log calls it
    under its lock and applies the entries once the write is done.
    """
    kept: list[tuple[int, list[BatchHeader]]] = []
    pending: dict[int, ProducerEntry] = {}
    refused: dict[int, StorageError] = {}
    for i, headers in valid:
        updates: dict[int, ProducerEntry] = {}
        running = offset
        try:
            for h in headers:
                first = running
                running += h.last_offset_delta + 1
                pid = h.producer_id
                if pid < 0 or h.is_control:
                    continue
                if h.base_sequence < 0:
                    raise InvalidRecordError(
                        f"{where}: batch of producer {pid} has no sequence number"
                    )
                cur = updates.get(pid) or pending.get(pid) or known(pid)
                last_seq = increment_sequence(h.base_sequence, h.last_offset_delta)
                dup = check_append(
                    cur, h.producer_epoch, h.base_sequence, last_seq, f"{where} at {first}"
                )
                if dup is not None:
                    raise DuplicateSequenceError(
                        f"{where}: producer {pid} epoch {h.producer_epoch} sequences "
                        f"{h.base_sequence}-{last_seq} are already at offsets "
                        f"{dup.first_offset}-{dup.last_offset}",
                        first_offset=dup.first_offset,
                        last_offset=dup.last_offset,
                        log_start_offset=log_start_offset,
                    )
                updates[pid] = with_batch(
                    cur or ProducerEntry(pid),
                    h.producer_epoch,
                    last_seq,
                    running - 1,
                    h.last_offset_delta,
                    h.max_timestamp,
                )
        except StorageError as e:
            refused[i] = e
            continue
        pending.update(updates)
        kept.append((i, headers))
        offset = running
    return kept, pending, refused


def is_expired(entry: ProducerEntry, now_ms: int, expiration_ms: int) -> bool:
    """Kafka's rule: idle for ``expiration_ms`` by its last batch's timestamp, no open txn."""
    return entry.current_txn_first_offset < 0 and now_ms - entry.last_timestamp >= expiration_ms


# -- the snapshot codec -------------------------------------------------------------------


def encode_snapshot(entries: Iterable[ProducerEntry]) -> bytes:
    """Kafka's ``ProducerSnapshot`` v1 (what ``ProducerStateManager.writeSnapshot`` writes).

    Each producer is one :data:`SNAPSHOT_ENTRY` of its last batch only: older batches are not
    kept in snapshots by Kafka either (a retry older than the last batch of a producer after a
    restart is answered OUT_OF_ORDER_SEQUENCE_NUMBER by Kafka too). Sorted by producer id, so
    the same state always gives the same bytes.
    """
    body = bytearray()
    count = 0
    for e in sorted(entries, key=lambda e: e.producer_id):
        last = e.batches[-1] if e.batches else None
        body += SNAPSHOT_ENTRY.pack(
            e.producer_id,
            e.epoch,
            last.last_seq if last else NO_SEQUENCE,
            last.last_offset if last else -1,
            last.offset_delta if last else 0,
            e.last_timestamp,
            e.coordinator_epoch,
            e.current_txn_first_offset,
        )
        count += 1
    out = bytearray(_SNAPSHOT_HEADER.pack(SNAPSHOT_VERSION, 0, count))
    out += body
    struct.pack_into(">I", out, 2, crc32c.crc32c(memoryview(out)[_CRC_START:]))
    return bytes(out)


def decode_snapshot(data: bytes, source: str) -> list[ProducerEntry]:
    """Read a snapshot; raises :class:`CorruptSnapshotError` on any mismatch."""
    if len(data) < _SNAPSHOT_HEADER.size:
        raise CorruptSnapshotError(f"{source}: {len(data)} bytes, shorter than the header")
    version, crc, count = _SNAPSHOT_HEADER.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"{source}: unknown snapshot version {version}")
    if count < 0 or len(data) != _SNAPSHOT_HEADER.size + count * SNAPSHOT_ENTRY.size:
        raise CorruptSnapshotError(
            f"{source}: {len(data)} bytes do not hold the {count} entries the header declares"
        )
    actual = crc32c.crc32c(memoryview(data)[_CRC_START:])
    if actual != crc:
        raise CorruptSnapshotError(f"{source}: CRC {actual:#010x} != stored {crc:#010x}")
    out = []
    for pid, epoch, last_seq, last_offset, delta, ts, coord, txn in SNAPSHOT_ENTRY.iter_unpack(
        memoryview(data)[_SNAPSHOT_HEADER.size :]
    ):
        batches = (BatchMetadata(last_seq, last_offset, delta, ts),) if last_offset >= 0 else ()
        out.append(ProducerEntry(pid, epoch, batches, ts, coord, txn))
    return out


# -- files (OSError propagates: callers hold the directory's failure guard) ----------------


def list_snapshots(dir_path: str) -> list[int]:
    """The offsets of the snapshot files in a replica folder, ascending."""
    offsets = []
    for name in os.listdir(dir_path):
        off = parse_snapshot_file(name)
        if off is not None:
            offsets.append(off)
    return sorted(offsets)


def snapshot_path(dir_path: str, offset: int) -> str:
    return os.path.join(dir_path, snapshot_file_name(offset))


def read_snapshot_file(dir_path: str, offset: int) -> list[ProducerEntry]:
    path = snapshot_path(dir_path, offset)
    with open(path, "rb") as f:
        return decode_snapshot(f.read(), path)


def write_snapshot_file(
    dir_path: str, offset: int, entries: Iterable[ProducerEntry], *, sync: bool
) -> None:
    """Write a snapshot under a temporary name and rename it into place.

    ``sync`` (a clean shutdown) fsyncs the file and the folder. A roll does not: it runs under
    the log's lock on the append path, as in Kafka, which flushes roll snapshots later. A crash
    can then leave the renamed file short or empty; a start reads it, fails its length or CRC
    check, deletes it and falls back to an older snapshot or to the log, so an unsynced
    snapshot can cost a longer replay, never a wrong state.
    """
    path = snapshot_path(dir_path, offset)
    data = encode_snapshot(entries)
    if sync:
        write_atomically(path, data)
        return
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def delete_snapshot_file(dir_path: str, offset: int) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(snapshot_path(dir_path, offset))


# -- the per-replica map ------------------------------------------------------------------


class ProducerStateManager:
    """The producers of one replica: the map a log keeps, and its snapshot files.

    ``last_snapshot_offset`` is the offset of the newest snapshot written or loaded, so a
    shutdown right after a roll does not write the same file again.
    """

    __slots__ = ("dir_path", "last_snapshot_offset", "producers")

    def __init__(self, dir_path: str) -> None:
        self.dir_path = dir_path
        self.producers: dict[int, ProducerEntry] = {}
        self.last_snapshot_offset = -1

    def entry(self, producer_id: int) -> ProducerEntry | None:
        return self.producers.get(producer_id)

    def apply_batch(
        self,
        producer_id: int,
        epoch: int,
        base_seq: int,
        last_offset: int,
        offset_delta: int,
        ts: int,
    ) -> None:
        """Record a batch without checks: a follower's and a replay's (the leader that wrote
        it checked it, as in Kafka's replication origin)."""
        cur = self.producers.get(producer_id) or ProducerEntry(producer_id)
        last_seq = increment_sequence(base_seq, offset_delta)
        self.producers[producer_id] = with_batch(
            cur, epoch, last_seq, last_offset, offset_delta, ts
        )

    def update(self, entries: dict[int, ProducerEntry]) -> None:
        """Install the entries a leader computed for an append it has just written."""
        self.producers.update(entries)

    def clear(self) -> None:
        self.producers.clear()
        self.last_snapshot_offset = -1

    def load(self, entries: list[ProducerEntry], offset: int) -> None:
        self.producers = {e.producer_id: e for e in entries}
        self.last_snapshot_offset = offset

    def remove_expired(self, now_ms: int, expiration_ms: int = PRODUCER_ID_EXPIRATION_MS) -> None:
        gone = [pid for pid, e in self.producers.items() if is_expired(e, now_ms, expiration_ms)]
        for pid in gone:
            del self.producers[pid]

    def take_snapshot(self, offset: int, *, sync: bool) -> bool:
        """Write ``<offset>.snapshot`` (the state after every batch below ``offset``) unless the
        newest snapshot is already there."""
        if offset <= self.last_snapshot_offset:
            return False
        write_snapshot_file(self.dir_path, offset, self.producers.values(), sync=sync)
        self.last_snapshot_offset = offset
        return True

    def copy_from(self, other: ProducerStateManager) -> None:
        """A move's swap: the new log takes the source's map (entries are immutable)."""
        self.producers = dict(other.producers)
