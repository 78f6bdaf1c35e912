"""The record reader is bounded by its batch.

The reader walks records where they lie in the caller's buffer instead of a copy of the batch,
so the bytes after a batch are readable to it: a batch whose records run short or long must be
refused all the same when another batch follows it.
"""

from __future__ import annotations

import pytest

from jbod_broker.storage.errors import StorageError
from jbod_broker.storage.records import (
    build_batch,
    validate_batches,
)
from tests.bad_batches import BASE_TS, bad_batches


@pytest.mark.parametrize("name", sorted(bad_batches()))
def test_a_bad_batch_followed_by_a_good_one_is_refused(name: str) -> None:
    bad = bad_batches()[name]
    good = build_batch([(b"k", b"v" * 30)] * 3, base_timestamp=BASE_TS)
    with pytest.raises(StorageError) as exc:
        validate_batches(bad.data + good)
    assert exc.value.kafka_error == bad.error
    assert "position 0" in str(exc.value)
    for word in bad.words:
        assert word.lower() in str(exc.value).lower()
