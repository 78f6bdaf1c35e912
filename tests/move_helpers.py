"""Helpers for tests and benchmarks of moves: known payloads, appenders, reading a log back.

They live with the tests, not in the broker package: nothing in production uses them.

Payloads are ``b"<tag>:<seq>"`` with ``seq`` counting from 0 per appender, so a log read back
can be checked for loss, duplicates and order without keeping every byte in memory.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

from jbod_broker.storage.errors import KafkaStorageError
from jbod_broker.storage.log import Log
from jbod_broker.storage.records import build_batch, decode_batch, iter_batches


def payload(tag: str, seq: int, pad: int = 0) -> bytes:
    return f"{tag}:{seq}:".encode() + b"x" * pad


def parse_payload(value: bytes) -> tuple[str, int]:
    tag, seq, _ = value.split(b":", 2)
    return tag.decode(), int(seq)


def iter_records(lg: Log, *, max_bytes: int = 1 << 20) -> Iterator[tuple[int, bytes]]:
    """(offset, value) of every record from the log start offset to the log end offset."""
    offset = lg.log_start_offset
    while True:
        res = lg.read(offset, max_bytes)
        if not res.data:
            return
        for pos, hdr in iter_batches(res.data):
            _, records = decode_batch(res.data, pos)
            for rec in records:
                if rec.offset >= offset:
                    yield rec.offset, rec.value or b""
            offset = hdr.next_offset
        if offset >= res.log_end_offset:
            return


def read_values(lg: Log) -> list[bytes]:
    return [v for _, v in iter_records(lg)]


class Appender(threading.Thread):
    """Appends batches of known payloads to one partition until stopped.

    ``get_log`` is called for every batch (pass ``lambda: manager.get_log(tp)``), or once when
    ``hold`` is set, to exercise callers that keep a log object across a move. Acknowledged
    sequence numbers are those whose append returned (and, with ``flush``, was flushed).
    """

    def __init__(
        self,
        tag: str,
        get_log: Callable[[], Log | None],
        *,
        records_per_batch: int = 3,
        pad: int = 100,
        hold: bool = False,
        flush: bool = False,
        epoch: Callable[[], int] = lambda: 1,
        pause: float = 0.0,
        on_ack: Callable[[int, int], None] | None = None,
    ) -> None:
        super().__init__(name=f"appender-{tag}", daemon=True)
        self.tag = tag
        self._get_log = get_log
        self._records = records_per_batch
        self._pad = pad
        self._hold = hold
        self._flush = flush
        self._epoch = epoch
        self._pause = pause
        self._on_ack = on_ack
        self._stop_event = threading.Event()
        self.acked = 0
        """Records acknowledged: sequence numbers 0..acked-1. While running, an append may be
        in flight past it; compare it with the log only after ``stop()``."""
        self.error: BaseException | None = None

    def stop(self) -> None:
        self._stop_event.set()
        self.join()
        if self.error is not None:
            raise self.error

    def run(self) -> None:
        held = self._get_log() if self._hold else None
        try:
            while not self._stop_event.is_set():
                lg = held if held is not None else self._get_log()
                if lg is None:
                    time.sleep(0.001)
                    continue
                seqs = range(self.acked, self.acked + self._records)
                batch = build_batch([(None, payload(self.tag, s, self._pad)) for s in seqs])
                info = lg.append_as_leader(batch, self._epoch())
                if self._flush:
                    lg.flush()
                lg.update_high_watermark(info.last_offset + 1)
                self.acked += self._records
                if self._on_ack is not None:
                    self._on_ack(info.first_offset, self.acked)
                if self._pause:
                    time.sleep(self._pause)
        except KafkaStorageError as e:
            self.error = e
        except BaseException as e:
            self.error = e


def check_sequence(values: list[bytes], tag: str, acked: int) -> None:
    """Values of one appender: exactly 0..n-1 in order, n >= acked. Raises AssertionError."""
    seqs = [parse_payload(v)[1] for v in values if parse_payload(v)[0] == tag]
    if seqs != list(range(len(seqs))):
        bad = next(i for i, s in enumerate(seqs) if s != i)
        raise AssertionError(
            f"{tag}: sequence broken at index {bad}: found {seqs[bad]} "
            f"(around {seqs[max(0, bad - 3) : bad + 3]})"
        )
    if len(seqs) < acked:
        raise AssertionError(f"{tag}: {acked} records acknowledged but only {len(seqs)} in the log")


def fill(lg: Log, nbytes: int, *, batch_bytes: int = 16 * 1024, epoch: int = 1) -> int:
    """Append about ``nbytes`` of batches of about ``batch_bytes``; returns the bytes added."""
    value = b"v" * max(1, batch_bytes - 100)
    batch = build_batch([(None, value)])
    group = batch * max(1, (1 << 20) // len(batch))
    added = 0
    while added < nbytes:
        chunk = group if nbytes - added >= len(group) else batch
        lg.append_as_leader(chunk, epoch)
        added += len(chunk)
    return added
