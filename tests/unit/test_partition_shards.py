"""The sharding rule of the partition state of record (issue 39), and the store's writes under
concurrent writers: property tests over an in-memory API server with resourceVersions."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jbod_operator.clients.kube import ApiError
from jbod_operator.clients.partition_store import PartitionStore, updates_of
from jbod_operator.models import PartitionShard
from jbod_operator.models.partition_shard import MAX_OBJECT_BYTES, MAX_SHARDS, SHARD_SIZE
from jbod_operator.models.topic import MAX_PARTITIONS
from jbod_operator.plan import partition_shards as rule
from tests.fake_api import FakeApi, largest_state, state, topic


def stored_partitions(api: FakeApi) -> list[int]:
    return [
        int(s["partition"]) for s in rule.join(api.topic, api.objs.values())["status"]["partitions"]
    ]


# -- the rule ---------------------------------------------------------------------------------


@given(st.sets(st.integers(0, MAX_PARTITIONS - 1), max_size=600))
def test_every_partition_is_in_exactly_one_shard_of_bounded_size(parts: set[int]) -> None:
    shards = rule.split(state(p) for p in parts)
    listed = [int(s["partition"]) for k in sorted(shards) for s in shards[k]]
    assert listed == sorted(parts)  # each exactly once, in order
    for k, states in shards.items():
        assert 0 <= k < MAX_SHARDS and len(states) <= SHARD_SIZE
        assert all(int(s["partition"]) in rule.shard_range(k) for s in states)


@given(st.text("abcdefghij-.", min_size=1, max_size=253), st.integers(0, MAX_SHARDS - 1))
def test_shard_names_are_valid_and_their_own(name: str, k: int) -> None:
    got = rule.shard_name(name, k)
    assert len(got) <= 253 and got.endswith(f"-{k}")
    if len(name) + len(f"-{k}") <= 253:
        assert got == f"{name}-{k}"  # injective: the suffix holds no dash


def test_the_largest_shard_the_schema_admits_is_under_the_object_bound() -> None:
    worst = largest_state(2**31 - 1)
    t = topic(name="t" * 253, uid="u" * 64)
    body = rule.shard_body(t, MAX_SHARDS - 1, [worst] * SHARD_SIZE, resource_version="9" * 20)
    PartitionShard.model_validate(body)
    assert len(json.dumps(body)) < MAX_OBJECT_BYTES


def test_a_recreated_topic_never_reads_the_shards_of_the_one_before() -> None:
    old = rule.shard_body(topic(uid="old"), 0, [state(0, epoch=7)])
    joined = rule.join(topic(uid="new"), [old])
    assert joined["status"]["partitions"] == []


# -- migration from the Topic's status ---------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 5 * SHARD_SIZE), st.integers(0, 6), st.randoms(use_true_random=False))
def test_moving_legacy_states_into_shards_loses_and_duplicates_nothing(
    n: int, crash_after: int, rng: random.Random
) -> None:
    legacy = [state(p, epoch=p) for p in range(n)]
    api = FakeApi(rng, topic(legacy=legacy))
    api.fail_after = crash_after
    crashes = crash_after < rule.shard_count(n) + 1
    with pytest.raises(ConnectionError) if crashes else contextlib.nullcontext():
        asyncio.run(PartitionStore(api).migrate(api.topic))  # type: ignore[arg-type]
    assert stored_partitions(api) == list(range(n))  # mid-way: each range from one place
    api.fail_after = None
    assert asyncio.run(PartitionStore(api).migrate(api.topic))  # type: ignore[arg-type]
    assert not api.topic["status"]["partitions"]
    joined = rule.join(api.topic, api.objs.values())["status"]["partitions"]
    assert joined == legacy


# -- concurrent writers ------------------------------------------------------------------------


async def _bump_epochs(store: PartitionStore, api: FakeApi, parts: list[int]) -> int:
    """Read, add one to each partition's leaderEpoch, write; again on a conflict. Returns the
    increments that were written."""
    done = 0
    for p in parts:
        while True:
            t = await store.topic("ns", "orders")
            assert t is not None
            cur = next((s for s in t["status"]["partitions"] if s["partition"] == p), None)
            if cur is None:  # moved into a shard this cache has not seen: read them again
                await store.shards("ns", fresh=True)
                continue
            try:
                await store.put(t, {p: {**cur, "leaderEpoch": cur["leaderEpoch"] + 1}})
                done += 1
                break
            except ApiError as e:
                assert e.status == 409
    return done


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 3 * SHARD_SIZE - 1), max_size=12), min_size=2, max_size=4),
    st.randoms(use_true_random=False),
)
def test_concurrent_writers_with_stale_versions_lose_no_update(
    plans: list[list[int]], rng: random.Random
) -> None:
    api = FakeApi(rng)
    n = 3 * SHARD_SIZE
    seed = PartitionStore(api)  # type: ignore[arg-type]
    asyncio.run(seed.put(api.topic, {p: state(p) for p in range(n)}))

    async def run() -> list[int]:
        # Each writer is its own process (its own cache): e.g. a deposed operator and the new.
        stores = [PartitionStore(api) for _ in plans]  # type: ignore[arg-type]
        return list(
            await asyncio.gather(
                *(_bump_epochs(s, api, p) for s, p in zip(stores, plans, strict=True))
            )
        )

    done = asyncio.run(run())
    assert sum(done) == sum(len(p) for p in plans)
    states = rule.join(api.topic, api.objs.values())["status"]["partitions"]
    assert [s["partition"] for s in states] == list(range(n))
    want = {p: sum(plan.count(p) for plan in plans) for p in range(n)}
    assert {s["partition"]: s["leaderEpoch"] for s in states} == want


def test_offsets_name_each_changed_partition_once_in_order() -> None:
    api = FakeApi(random.Random(1))
    store = PartitionStore(api)  # type: ignore[arg-type]
    asyncio.run(store.put(api.topic, {p: state(p) for p in range(3)}))
    start = store.offset
    asyncio.run(store.put(api.topic, {2: state(2, epoch=1)}))
    asyncio.run(store.put(api.topic, {0: state(0, epoch=1)}))
    asyncio.run(store.put(api.topic, {2: state(2, epoch=2)}))
    assert [k for k, _ in store.changes_since("ns", start)] == [("uid-1", 0), ("uid-1", 2)]
    assert [at for _, at in store.changes_since("ns", start)] == [start + 2, start + 3]
    assert store.changes_since("ns", store.offset) == []


def test_updates_of_names_only_what_changed() -> None:
    before = [state(0), state(1)]
    after = [state(0), state(1, epoch=3), state(2)]
    assert sorted(updates_of(before, after)) == [1, 2]


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 3 * SHARD_SIZE),
    st.lists(st.integers(0, 3 * SHARD_SIZE - 1), max_size=10),
    st.randoms(use_true_random=False),
)
def test_states_moved_out_of_the_topic_while_another_writer_writes_are_never_lost(
    n: int, bumps: list[int], rng: random.Random
) -> None:
    """One operator moves a legacy Topic's states into shards while another (its own cache)
    writes some of them: each partition ends in exactly one place with every write in it."""
    legacy = [state(p) for p in range(n)]
    api = FakeApi(rng, topic(legacy=legacy))
    parts = [p for p in bumps if p < n]

    async def migrate() -> None:
        store = PartitionStore(api)  # type: ignore[arg-type]
        while not await store.migrate(api.topic):
            pass

    async def run() -> int:
        writer = PartitionStore(api)  # type: ignore[arg-type]
        done, _ = await asyncio.gather(_bump_epochs(writer, api, parts), migrate())
        return done

    assert asyncio.run(run()) == len(parts)
    assert not api.topic["status"]["partitions"]  # moved out
    joined = rule.join(api.topic, api.objs.values())["status"]["partitions"]
    assert [s["partition"] for s in joined] == list(range(n))
    assert {s["partition"]: s["leaderEpoch"] for s in joined} == {
        p: parts.count(p) for p in range(n)
    }
