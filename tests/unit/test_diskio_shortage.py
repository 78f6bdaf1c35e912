"""A move's own shortage is the move's failure, not the disk's (issue 13).

The failure channel takes a directory offline on any OSError (KIP-112), except an out-of-space
error raised where the caller said a shortage is its own (a move writing its future copy):
that surfaces as InsufficientSpaceError and the directory stays online.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from jbod_broker.storage.diskio import LogDirFailureChannel
from jbod_broker.storage.errors import InsufficientSpaceError, KafkaStorageError, StorageError
from jbod_broker.storage.log import Log, LogConfig
from jbod_broker.storage.names import TopicPartition


def enospc() -> OSError:
    return OSError(errno.ENOSPC, "No space left on device", "/d/x-future/0.log")


def test_a_shortage_of_ones_own_fails_the_caller_not_the_dir() -> None:
    ch = LogDirFailureChannel()
    with (
        pytest.raises(InsufficientSpaceError) as e,
        ch.guard("/d", "copy", shortage_fails_dir=False),
    ):
        raise enospc()
    assert "log dir /d ran out of space: copy: No space left on device" in str(e.value)
    assert not ch.is_offline("/d")


@pytest.mark.parametrize("code", [errno.EDQUOT, errno.ENOSPC])
def test_quota_and_space_are_both_shortages(code: int) -> None:
    ch = LogDirFailureChannel()
    with pytest.raises(InsufficientSpaceError), ch.guard("/d", "copy", shortage_fails_dir=False):
        raise OSError(code, "full")
    assert not ch.is_offline("/d")


def test_other_errors_still_fail_the_dir_even_for_a_move() -> None:
    ch = LogDirFailureChannel()
    with pytest.raises(KafkaStorageError), ch.guard("/d", "copy", shortage_fails_dir=False):
        raise OSError(errno.EIO, "I/O error")
    ch.drain()
    assert ch.is_offline("/d")


def test_by_default_a_shortage_is_a_disk_failure() -> None:
    ch = LogDirFailureChannel()
    with pytest.raises(KafkaStorageError) as e, ch.guard("/d", "append"):
        raise enospc()
    assert not isinstance(e.value, InsufficientSpaceError)
    ch.drain()
    assert "No space left on device" in (ch.reason("/d") or "")


def test_a_future_logs_shortage_keeps_the_dir_online_a_current_logs_does_not(
    tmp_path: Path,
) -> None:
    tp = TopicPartition("t", 0)
    for is_future, dir_fails in ((True, False), (False, True)):
        ch = LogDirFailureChannel()
        d = tmp_path / f"future-{is_future}"
        lg = Log.create(str(d / "t-0"), tp, LogConfig(), ch, log_dir=str(d), is_future=is_future)
        with pytest.raises(StorageError) as e, lg._guard("append"):
            raise enospc()
        ch.drain()
        assert isinstance(e.value, InsufficientSpaceError) is not dir_fails
        assert ch.is_offline(str(d)) is dir_fails
        assert isinstance(lg._io_failed(enospc(), "append"), InsufficientSpaceError) is is_future
        lg.close_quietly()
