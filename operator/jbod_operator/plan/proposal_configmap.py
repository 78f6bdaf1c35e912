"""The layout of a Rebalance's proposal ConfigMap (``<name>-proposal``), in one place.

The API server refuses a ConfigMap whose data and binaryData together pass 1 MiB. A proposal's
files grow with its moves: at the bench's 250 brokers x 12 disks x 1,000,000 replicas the plan
names thousands of partitions and ``reassignment.json`` alone passes the limit, where a write
would fail on every pass. So the text files are stored as they are while everything fits (what
``kubectl get configmap -o yaml`` shows a person), and otherwise each one gzip-compressed under
binaryData as ``NAME.gz`` (JSON of partition lists compresses about tenfold); the plot is
binaryData either way. A proposal too large even compressed is refused with its size, so the
Rebalance can say so instead of retrying a write that cannot succeed.

Pure: no I/O (gzip and base64 work in memory).
"""

from __future__ import annotations

import base64
import binascii
import gzip
import zlib
from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "CONFIGMAP_LIMIT",
    "GZ",
    "PLOT",
    "TEXT_FILES",
    "ProposalTooLarge",
    "pack",
    "read_text",
]

CONFIGMAP_LIMIT: Final = 1024 * 1024 - 16 * 1024
"""Bytes of keys and values a proposal may use: the API server's 1 MiB for a ConfigMap's data
and binaryData (binaryData counted decoded), less room to spare."""
TEXT_FILES: Final = (
    "reassignment.json",
    "report.json",
    "report.txt",
    "manifests.json",
    "waves.json",
)
PLOT: Final = "plot.png"
GZ: Final = ".gz"


class ProposalTooLarge(ValueError):
    """The proposal does not fit in a ConfigMap, even compressed."""


def _size(items: Mapping[str, bytes]) -> int:
    return sum(len(k) + len(v) for k, v in items.items())


def pack(files: Mapping[str, bytes]) -> tuple[dict[str, str], dict[str, str]]:
    """``data`` and ``binaryData`` for ``files`` (any of :data:`TEXT_FILES` and :data:`PLOT`).

    Everything as it is when it fits; otherwise every text file gzip-compressed as ``NAME.gz``
    (all of them, so a reader never has to guess which). Raises :class:`ProposalTooLarge`."""
    text = {n: files[n] for n in TEXT_FILES if n in files}
    plot = {PLOT: files[PLOT]} if PLOT in files else {}
    binary = {k: base64.b64encode(v).decode() for k, v in plot.items()}
    if _size(text) + _size(plot) <= CONFIGMAP_LIMIT:
        return {n: v.decode() for n, v in text.items()}, binary
    packed = {n + GZ: gzip.compress(v, mtime=0) for n, v in text.items()}
    size = _size(packed) + _size(plot)
    if size > CONFIGMAP_LIMIT:
        raise ProposalTooLarge(
            f"the proposal takes {size} bytes even gzip-compressed ({_size(text) + _size(plot)} "
            f"plain), more than a ConfigMap holds ({CONFIGMAP_LIMIT})"
        )
    binary |= {k: base64.b64encode(v).decode() for k, v in packed.items()}
    return {}, binary


def read_text(cm: Mapping[str, Any], name: str) -> str | None:
    """The text file ``name`` of a proposal ConfigMap, in either layout; None when absent.
    Raises ValueError when the compressed form does not decode."""
    data = cm.get("data") or {}
    if name in data:
        return str(data[name])
    raw = (cm.get("binaryData") or {}).get(name + GZ)
    if raw is None:
        return None
    try:
        return gzip.decompress(base64.b64decode(raw, validate=True)).decode()
    except (binascii.Error, OSError, EOFError, zlib.error, UnicodeDecodeError) as e:
        raise ValueError(f"{name}{GZ} does not decode: {e}") from None
