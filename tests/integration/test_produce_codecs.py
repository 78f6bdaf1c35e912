"""Issue 18: a broker process takes batches of every codec and serves them back unchanged.

Batches compressed by aiokafka's record builder (its own snappy-java stream and lz4 frame code)
and by ours go through the HTTP produce path of a real broker; a fetch returns exactly the bytes
sent, except the two fields a leader stamps in place (base offset, partition leader epoch),
which the CRC does not cover: nothing was decompressed and re-encoded on the way.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from jbod_broker.client import BrokerClient
from jbod_broker.local import LocalCluster, lead_alone
from jbod_broker.storage.compression import CODEC_NAMES, GZIP, LZ4, NONE, SNAPPY, ZSTD
from jbod_broker.storage.records import Header, build_batch, decode_batch, iter_batches

pytestmark = pytest.mark.integration

BASE_TS = 1_700_000_000_000
CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]


def _records(tag: str) -> list[tuple[bytes, bytes, list[tuple[str, bytes | None]]]]:
    return [
        (f"{tag}-{i}".encode(), (b"%s payload %d " % (tag.encode(), i)) * 40, [("n", b"%d" % i)])
        for i in range(25)
    ]


def _aiokafka_batch(codec: int, tag: str) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i, (key, value, headers) in enumerate(_records(tag)):
        builder.append(i, timestamp=BASE_TS + i, key=key, value=value, headers=headers)
    data = bytes(builder.build())
    assert data[22] == codec  # aiokafka kept the codec (the values compress well)
    return data


def _our_batch(codec: int, tag: str) -> bytes:
    return build_batch(
        [(k, v, [Header(hk, hv) for hk, hv in hs]) for k, v, hs in _records(tag)],
        timestamps=[BASE_TS + i for i in range(25)],
        compression=codec,
    )


def _same_but_stamped(sent: bytes, stored: bytes) -> bool:
    """Equal outside baseOffset (0..8) and partitionLeaderEpoch (12..16)."""
    return len(sent) == len(stored) and sent[8:12] == stored[8:12] and sent[16:] == stored[16:]


def test_every_codec_is_produced_and_fetched_unchanged(tmp_path: Path) -> None:
    cl = LocalCluster(str(tmp_path), size=1, num_dirs=1)
    cl.start()
    try:
        tags = [
            (codec, f"{CODEC_NAMES[codec]}-{who}", maker)
            for codec in CODECS
            for who, maker in (("aiokafka", _aiokafka_batch), ("ours", _our_batch))
        ]
        sent = [(codec, tag, maker(codec, tag)) for codec, tag, maker in tags]

        async def scenario() -> bytes:
            async with BrokerClient(cl[0].url, token=cl.token) as c:
                await lead_alone(c, "codecs", 1)
                for i, (_, _, batch) in enumerate(sent):
                    r = await c.produce("codecs", 0, batch, acks=1)
                    assert r is not None and r.base_offset == 25 * i, r
                stored = b""
                offset = 0
                while True:
                    data, hw = await c.fetch("codecs", 0, offset)
                    stored += data
                    offset = list(iter_batches(stored))[-1][1].next_offset
                    if offset >= hw:
                        return stored

        stored = asyncio.run(scenario())
        batches = list(iter_batches(stored))
        assert len(batches) == len(sent)
        for i, ((pos, header), (codec, tag, batch)) in enumerate(zip(batches, sent, strict=True)):
            assert header.compression == codec
            assert _same_but_stamped(batch, stored[pos : pos + header.size_in_bytes]), tag
            _, records = decode_batch(stored, pos)
            assert [r.offset for r in records] == list(range(25 * i, 25 * i + 25))
            assert [(r.key, r.value, [(h.key, h.value) for h in r.headers]) for r in records] == [
                (k, v, hs) for k, v, hs in _records(tag)
            ]
    finally:
        cl.stop()
