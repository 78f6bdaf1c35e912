"""Partition's answer to an AlterPartition (issue 38): the rules without a broker around them.

The integration test (tests/integration/test_alter_partition_lost_answer.py) drives the lost
answer through real processes; these pin down which answers the partition applies.
"""

from __future__ import annotations

from jbod_broker import wire
from jbod_broker.partition import IsrCommitted, Partition
from jbod_broker.storage.names import TopicPartition

TP = TopicPartition("t", 0)


def leading(pending: list[int] | None = None) -> Partition:
    """Broker 0 leads at leader epoch 3, partition epoch 5, ISR [0, 1, 2]."""
    p = Partition(
        TP,
        leader=0,
        leader_epoch=3,
        partition_epoch=5,
        isr=[0, 1, 2],
        replicas=[0, 1, 2],
        local_broker_id=0,
    )
    if pending is not None:
        p.propose_isr(pending)
    return p


def answer(
    error: str | None, *, isr: list[int], epoch: int, leader_epoch: int = 3
) -> wire.AlterPartitionResult:
    return wire.AlterPartitionResult(
        topic=TP.topic,
        partition=TP.partition,
        error=error,
        leader=0,
        leader_epoch=leader_epoch,
        isr=isr,
        partition_epoch=epoch,
    )


def test_a_proposal_carries_the_epochs_known_and_stays_pending() -> None:
    p = leading()
    item = p.propose_isr([0, 1])
    assert (item.leader_epoch, item.partition_epoch, item.new_isr) == (3, 5, [0, 1])
    assert p.pending_isr == [0, 1] and p.maximal_isr == {0, 1, 2}


def test_an_accepted_proposal_is_committed_as_its_own() -> None:
    p = leading([0, 1])
    assert p.alter_partition_answered(answer(None, isr=[0, 1], epoch=6)) == IsrCommitted(
        own=True, expand=False
    )
    assert (p.isr, p.partition_epoch, p.pending_isr) == ([0, 1], 6, None)


def test_a_refusal_carrying_the_change_applied_is_adopted() -> None:
    """The retry of a shrink whose first answer was lost: INVALID_UPDATE_VERSION at the stale
    epoch, with the committed state that is the shrink itself."""
    p = leading([0, 1])
    got = p.alter_partition_answered(answer("INVALID_UPDATE_VERSION", isr=[0, 1], epoch=6))
    assert got == IsrCommitted(own=True, expand=False)
    assert (p.isr, p.partition_epoch, p.pending_isr) == ([0, 1], 6, None)


def test_a_refusal_without_a_newer_state_changes_nothing_but_the_proposal() -> None:
    for res in (
        answer("INELIGIBLE_REPLICA", isr=[0, 1, 2], epoch=5),  # same epoch: not applied
        answer("FENCED_LEADER_EPOCH", isr=[0, 1], epoch=6, leader_epoch=4),  # not our leadership
        answer("INVALID_UPDATE_VERSION", isr=[1, 2], epoch=6),  # we are not in it
    ):
        p = leading([0, 1])
        assert p.alter_partition_answered(res) is None
        assert (p.isr, p.partition_epoch, p.pending_isr) == ([0, 1, 2], 5, None)


def test_an_answer_with_nothing_pending_is_ignored() -> None:
    p = leading()
    assert p.alter_partition_answered(answer(None, isr=[0, 1], epoch=6)) is None
    assert (p.isr, p.partition_epoch) == ([0, 1, 2], 5)
