"""Continuous detection's trigger rules (plan/balance_trigger.py), one test per rule, on a fake
clock (sample times are plain numbers), plus hypothesis properties: never inside the cooldown,
never without the skew sustained for the whole window, never two at once."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jbod_operator.models import BalanceSpec, BalanceTrigger
from jbod_operator.models.rebalance import RebalanceMode
from jbod_operator.plan.balance_trigger import (
    DiskSample,
    History,
    Known,
    PartitionSize,
    RebalanceView,
    Sample,
    TriggerConfig,
    decide,
    metric_history_rows,
)

GB = 10**9
ALL = frozenset(BalanceTrigger)


def cfg(
    threshold: float = 10.0,
    window: float = 60.0,
    cooldown: float = 600.0,
    triggers: frozenset[BalanceTrigger] = ALL,
    gap: float = 25.0,
) -> TriggerConfig:
    return TriggerConfig(threshold, window, cooldown, triggers, gap)


def sample(
    t: float,
    used: Mapping[int, Sequence[float]],
    *,
    dirs: Sequence[str] = ("a", "b"),
    expected: Sequence[int] | None = None,
    offline: tuple[int, str] | None = None,
    cordoned: tuple[int, str] | None = None,
    capacity: int = 100 * GB,
) -> Sample:
    """Brokers ``used`` answer, each dir at the given percentage of ``capacity``."""
    disks = tuple(
        DiskSample(
            b,
            d,
            int(pct * capacity / 100),
            capacity,
            live=(b, d) != offline,
            cordoned=(b, d) == cordoned,
        )
        for b, pcts in used.items()
        for d, pct in zip(dirs, pcts, strict=True)
    )
    exp = frozenset(used) if expected is None else frozenset(expected)
    return Sample(t, exp, frozenset(used), disks)


def even(t: float, brokers: int = 3, pct: float = 50.0) -> Sample:
    return sample(t, {b: (pct, pct) for b in range(brokers)})


def skewed(t: float, brokers: int = 3, gap_pp: float = 30.0) -> Sample:
    """Broker 0's two disks ``gap_pp`` apart; every broker at 50 % overall."""
    used = {b: (50.0, 50.0) for b in range(brokers)}
    used[0] = (50.0 + gap_pp / 2, 50.0 - gap_pp / 2)
    return sample(t, used)


KNOWN3 = Known(frozenset({0, 1, 2}), frozenset({"a", "b"}))


def every(step: float, start: float, end: float) -> list[float]:
    out, t = [], start
    while t <= end + 1e-9:
        out.append(t)
        t += step
    return out


# -- threshold ----------------------------------------------------------------------------------


def test_threshold_a_spread_at_or_below_it_never_triggers() -> None:
    samples = [skewed(t, gap_pp=10.0) for t in every(10, 0, 120)]
    d = decide(samples, cfg(threshold=10.0), 120, KNOWN3)
    assert d.create is None
    assert d.sustained_since is None
    assert d.spread is not None and d.spread.disk_pp == pytest.approx(10.0)


def test_threshold_a_spread_above_it_triggers_dirs_only() -> None:
    samples = [skewed(t, gap_pp=10.5) for t in every(10, 0, 120)]
    d = decide(samples, cfg(threshold=10.0), 120, KNOWN3)
    assert d.create is not None
    assert (d.create.trigger, d.create.mode, d.create.brokers) == (
        BalanceTrigger.DISK_IMBALANCE,
        RebalanceMode.DIRS_ONLY,
        (),
    )
    assert d.spread is not None and d.spread.worst_broker == 0
    assert "broker 0" in d.create.reason


def test_threshold_across_brokers_asks_for_a_full_rebalance() -> None:
    # Every broker's own disks are even, but broker 2 is 40 pp emptier than the others.
    used = {0: (60.0, 60.0), 1: (60.0, 60.0), 2: (20.0, 20.0)}
    samples = [sample(t, used) for t in every(10, 0, 120)]
    d = decide(samples, cfg(), 120, KNOWN3)
    assert d.create is not None and d.create.mode == RebalanceMode.FULL
    assert d.spread is not None and d.spread.disk_pp == 0.0
    assert d.spread.broker_pp == pytest.approx(40.0)


def test_threshold_ignores_cordoned_and_capacity_less_dirs() -> None:
    # Broker 0's dir b is being drained (cordoned): its emptiness is no skew.
    samples = [
        sample(t, {0: (80.0, 0.0), 1: (80.0, 80.0), 2: (80.0, 80.0)}, cordoned=(0, "b"))
        for t in every(10, 0, 120)
    ]
    assert decide(samples, cfg(), 120, KNOWN3).create is None


# -- window -------------------------------------------------------------------------------------


def test_window_a_skew_shorter_than_the_window_does_not_trigger() -> None:
    samples = [even(t) for t in every(10, 0, 60)] + [skewed(t) for t in every(10, 70, 120)]
    d = decide(samples, cfg(window=60), 120, KNOWN3)
    assert d.create is None
    assert d.sustained_since == 70
    assert "10 s of the window left" in d.message
    # One more skewed sample covers the window.
    d = decide([*samples, skewed(130)], cfg(window=60), 130, KNOWN3)
    assert d.create is not None


def test_window_one_even_sample_restarts_it() -> None:
    samples = [skewed(t) for t in every(10, 0, 50)] + [even(60)]
    samples += [skewed(t) for t in every(10, 70, 120)]
    assert decide(samples, cfg(window=60), 120, KNOWN3).create is None


def test_window_a_gap_in_the_samples_restarts_it() -> None:
    # No sample between 20 and 60 (sampling failed): the skew was not watched all along.
    samples = [skewed(t) for t in [0, 10, 20, 60, 70, 80]]
    d = decide(samples, cfg(window=60, gap=25), 80, KNOWN3)
    assert d.create is None and d.sustained_since == 60


def test_window_needs_a_recent_sample() -> None:
    samples = [skewed(t) for t in every(10, 0, 120)]
    assert decide(samples, cfg(gap=25), 200, KNOWN3).create is None
    assert decide(samples, cfg(gap=25), 140, KNOWN3).create is not None


# -- health -------------------------------------------------------------------------------------


def test_an_offline_dir_never_triggers_and_breaks_the_window() -> None:
    # A failing disk reports nothing: broker 0's dir b offline looks emptied.
    samples = [skewed(t) for t in every(10, 0, 110)]
    samples.append(sample(120, {0: (80.0, 0.0), 1: (50, 50), 2: (50, 50)}, offline=(0, "b")))
    d = decide(samples, cfg(), 120, KNOWN3)
    assert d.create is None and "offline: broker 0 log dir b" in d.message
    # Back: the window starts again.
    d = decide([*samples, skewed(130)], cfg(), 130, KNOWN3)
    assert d.create is None and d.sustained_since == 130


def test_a_broker_that_does_not_answer_never_triggers() -> None:
    samples = [skewed(t) for t in every(10, 0, 110)]
    samples.append(sample(120, {0: (80.0, 20.0), 1: (50, 50)}, expected=[0, 1, 2]))
    d = decide(samples, cfg(), 120, KNOWN3)
    assert d.create is None and "broker 2 did not answer" in d.message


# -- never two at once, cooldown ----------------------------------------------------------------


def test_an_unfinished_rebalance_blocks_any_other() -> None:
    samples = [skewed(t) for t in every(10, 0, 120)]
    running = RebalanceView("manual", finished=False, triggered=False, created=0.0, phase="Ready")
    d = decide(samples, cfg(), 120, KNOWN3, [running])
    assert d.create is None and d.active == "manual"
    assert "waiting for Rebalance manual" in d.message


def test_cooldown_counts_from_the_creation_of_a_triggered_rebalance() -> None:
    samples = [skewed(t) for t in every(10, 0, 700)]
    made = RebalanceView("auto-1", finished=True, triggered=True, created=100.0)
    assert decide(samples, cfg(cooldown=600), 699, KNOWN3, [made]).create is None
    assert decide(samples, cfg(cooldown=600), 700, KNOWN3, [made]).create is not None


def test_cooldown_counts_from_the_end_of_a_triggered_rebalance() -> None:
    samples = [skewed(t) for t in every(10, 0, 1000)]
    made = RebalanceView("auto-1", finished=True, triggered=True, created=100.0, finished_at=390)
    d = decide(samples, cfg(cooldown=600), 989, KNOWN3, [made])
    assert d.create is None and d.cooldown_until == 990
    assert "cooling down for 1 s" in d.message
    assert decide(samples, cfg(cooldown=600), 990, KNOWN3, [made]).create is not None


def test_cooldown_survives_the_deletion_of_the_rebalance() -> None:
    samples = [skewed(t) for t in every(10, 0, 700)]
    assert decide(samples, cfg(cooldown=600), 650, KNOWN3, [], 100.0).create is None


def test_a_user_made_rebalance_starts_no_cooldown() -> None:
    samples = [skewed(t) for t in every(10, 0, 120)]
    manual = RebalanceView("manual", finished=True, triggered=False, created=100.0)
    assert decide(samples, cfg(), 120, KNOWN3, [manual]).create is not None


# -- each trigger -------------------------------------------------------------------------------


def test_broker_added_asks_for_add_brokers_with_the_new_ids() -> None:
    before = [even(t) for t in every(10, 0, 50)]
    # Brokers 3 and 4 in the spec, not answering yet.
    starting = [sample(60, {b: (50, 50) for b in range(3)}, expected=range(5))]
    after = [
        sample(t, {**{b: (50, 50) for b in range(3)}, 3: (0, 0), 4: (0, 0)})
        for t in every(10, 70, 130)
    ]
    history = before + starting + after
    d = decide(history[:-1], cfg(window=60), 120, KNOWN3)
    assert d.create is None and "broker 3, 4 added: waiting for the window" in d.message
    d = decide(history, cfg(window=60), 130, KNOWN3)
    assert d.create is not None
    assert (d.create.trigger, d.create.mode, d.create.brokers) == (
        BalanceTrigger.BROKER_ADDED,
        RebalanceMode.ADD_BROKERS,
        (3, 4),
    )
    assert d.known == KNOWN3  # until it is created
    assert d.create.known_after.brokers == {0, 1, 2, 3, 4}
    # Accounted for: once created, the same brokers never trigger again.
    later = [*history, sample(140, {b: (50, 50) for b in range(5)})]
    again = decide(later, cfg(window=60, cooldown=0), 140, d.create.known_after)
    assert again.create is None


def test_broker_added_without_its_trigger_is_accounted_for_at_once() -> None:
    history = [sample(t, {b: (50, 50) for b in range(4)}) for t in every(10, 0, 120)]
    only_disks = frozenset({BalanceTrigger.DISK_IMBALANCE})
    d = decide(history, cfg(triggers=only_disks), 120, KNOWN3)
    assert d.absorbed and d.known is not None and d.known.brokers == {0, 1, 2, 3}
    assert d.create is None


def test_disk_added_asks_for_dirs_only() -> None:
    history = [even(t) for t in every(10, 0, 50)]
    # Broker 0 restarted with dir c first (a rolling update): not on every broker yet.
    history.append(
        sample(60, {0: (50, 50, 0), 1: (50, 50, 50), 2: (50, 50, 50)}, dirs=("a", "b", "c"))
    )
    history[-1] = Sample(
        60,
        frozenset({0, 1, 2}),
        frozenset({0, 1, 2}),
        tuple(d for d in history[-1].disks if d.broker_id == 0 or d.log_dir != "c"),
    )
    only_added = frozenset({BalanceTrigger.DISK_ADDED})
    assert decide(history, cfg(window=30, triggers=only_added), 60, KNOWN3).create is None
    history += [
        sample(t, {b: (50, 50, 0) for b in range(3)}, dirs=("a", "b", "c"))
        for t in every(10, 70, 100)
    ]
    d = decide(history, cfg(window=30, triggers=only_added), 100, KNOWN3)
    assert d.create is not None
    assert (d.create.trigger, d.create.mode) == (BalanceTrigger.DISK_ADDED, RebalanceMode.DIRS_ONLY)
    assert "log dir c added" in d.create.reason
    assert d.create.known_after.log_dirs == {"a", "b", "c"}


def test_disk_imbalance_off_never_triggers_on_a_skew() -> None:
    samples = [skewed(t) for t in every(10, 0, 120)]
    off = frozenset({BalanceTrigger.BROKER_ADDED, BalanceTrigger.DISK_ADDED})
    assert decide(samples, cfg(triggers=off), 120, KNOWN3).create is None


def test_the_first_healthy_sample_is_the_baseline() -> None:
    # A restarted operator with nothing in status: nothing is "added" at first sight.
    history = [sample(t, {b: (50, 50) for b in range(4)}) for t in every(10, 0, 120)]
    d = decide(history, cfg(), 120, None)
    assert d.create is None
    assert d.known == Known(frozenset(range(4)), frozenset({"a", "b"}))
    # Not from a sample with a broker missing.
    d = decide([sample(0, {0: (50, 50)}, expected=[0, 1])], cfg(), 0, None)
    assert d.known is None and "broker 1 did not answer" in d.message


# -- the history bound --------------------------------------------------------------------------


def test_history_keeps_at_most_its_bound_newest_first_kept() -> None:
    h = History(5)
    for t in range(12):
        h.add(even(float(t)))
    assert len(h) == 5
    assert [s.time for s in h] == [7.0, 8.0, 9.0, 10.0, 11.0]
    h.resize(3)
    assert [s.time for s in h] == [9.0, 10.0, 11.0]
    h.resize(10)
    h.add(even(12.0))
    assert [s.time for s in h] == [9.0, 10.0, 11.0, 12.0]
    with pytest.raises(ValueError, match="time order"):
        h.add(even(12.0))


def test_a_window_longer_than_the_history_never_triggers() -> None:
    # The CRD refuses such a spec (historySamples x interval must exceed the window); the rule
    # holds anyway: a history that does not reach back a whole window proves nothing.
    h = History(5)
    for t in every(10, 0, 200):
        h.add(skewed(t))
    assert decide(h.samples(), cfg(window=60), 200, KNOWN3).create is None
    assert decide(h.samples(), cfg(window=40), 200, KNOWN3).create is not None


def test_config_from_spec() -> None:
    spec = BalanceSpec.model_validate(
        {
            "enabled": True,
            "diskSpreadThresholdPercent": 7.5,
            "windowSeconds": 2,
            "cooldownSeconds": 30,
            "triggers": ["disk-imbalance"],
            "sampleIntervalSeconds": 1,
            "historySamples": 10,
        }
    )
    c = TriggerConfig.from_spec(spec, slack_s=3.0)
    assert c == TriggerConfig(7.5, 2.0, 30.0, frozenset({BalanceTrigger.DISK_IMBALANCE}), 5.0)
    with pytest.raises(ValueError, match="longer than windowSeconds"):
        BalanceSpec(window_seconds=600, sample_interval_seconds=30, history_samples=20)
    with pytest.raises(ValueError, match="must not repeat"):
        BalanceSpec(triggers=[BalanceTrigger.DISK_ADDED, BalanceTrigger.DISK_ADDED])


# -- the Spark job's metric history -------------------------------------------------------------


def test_metric_history_rows_are_the_spark_job_s_columns() -> None:
    s0 = Sample(100.0, frozenset({0}), frozenset({0}), (), (PartitionSize("t", 0, 1000),))
    s1 = Sample(110.0, frozenset({0}), frozenset({0}), (), (PartitionSize("t", 0, 3000),))
    s2 = Sample(120.0, frozenset({0}), frozenset({0}), (), (PartitionSize("t", 0, 2000),))
    rows = metric_history_rows([s0, s1, s2], "demo")
    assert rows == [
        {"cluster": "demo", "time": 100.0, "topic": "t", "partition": 0, "size": 1000,
         "bytes_in": 0.0},
        {"cluster": "demo", "time": 110.0, "topic": "t", "partition": 0, "size": 3000,
         "bytes_in": 200.0},
        # retention deleted more than was written: no negative rate
        {"cluster": "demo", "time": 120.0, "topic": "t", "partition": 0, "size": 2000,
         "bytes_in": 0.0},
    ]  # fmt: skip


# -- properties ---------------------------------------------------------------------------------


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[Sample], float]:
    """Samples of 3 brokers at irregular times, in runs: even, skewed, skewed across brokers,
    or with a dir offline."""
    t = 0.0
    out: list[Sample] = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["even", "skewed", "skewed", "offline", "broker-skew"]))
        gap_pp = draw(st.floats(0.0, 60.0))
        for _ in range(draw(st.integers(1, 8))):
            t += draw(st.sampled_from([5.0, 10.0, 10.0, 10.0, 15.0, 40.0]))
            if kind == "even":
                out.append(even(t))
            elif kind == "skewed":
                out.append(skewed(t, gap_pp=gap_pp))
            elif kind == "offline":
                out.append(sample(t, {0: (80, 0), 1: (50, 50), 2: (50, 50)}, offline=(0, "b")))
            else:
                out.append(sample(t, {0: (70, 70), 1: (50, 50), 2: (50, 50)}))
    now = t + draw(st.sampled_from([0.0, 1.0, 5.0, 30.0]))
    return out, now


@settings(max_examples=300, deadline=None)
@given(
    histories(),
    st.floats(0.0, 400.0),
    st.floats(0.0, 600.0),
    st.floats(0.0, 100.0),
    st.booleans(),
)
def test_property_never_triggers_inside_the_cooldown(
    h: tuple[list[Sample], float],
    cooldown: float,
    age: float,
    ended_after: float,
    deleted: bool,
) -> None:
    samples, now = h
    created = now - age
    c = cfg(window=20.0, cooldown=cooldown)
    if deleted:
        d = decide(samples, c, now, KNOWN3, [], created)
        ref = created
    else:
        made = RebalanceView(
            "auto",
            finished=True,
            triggered=True,
            created=created,
            finished_at=created + ended_after,
        )
        d = decide(samples, c, now, KNOWN3, [made])
        ref = created + ended_after
    if now < ref + cooldown:
        assert d.create is None


@settings(max_examples=300, deadline=None)
@given(histories(), st.floats(0.0, 120.0), st.floats(1.0, 40.0))
def test_property_never_triggers_without_the_skew_sustained_for_the_whole_window(
    h: tuple[list[Sample], float], window: float, threshold: float
) -> None:
    samples, now = h
    c = cfg(threshold=threshold, window=window, cooldown=0.0, gap=25.0)
    d = decide(samples, c, now, KNOWN3)
    if d.create is None:
        return
    assert d.create.trigger == BalanceTrigger.DISK_IMBALANCE
    latest = samples[-1].time
    assert now - latest <= c.max_gap_s
    start = latest - window
    inside = [s for s in samples if s.time >= start]
    before = [s for s in samples if s.time <= start]
    # Skewed and healthy in every sample of the window, and in one at or before its start...
    assert before, "no sample reaches back to the window's start"
    for s in [before[-1], *inside]:
        assert s.problem is None
        assert s.spread.worst_pp > threshold
    # ...watched all along.
    run = [before[-1], *inside]
    assert all(b.time - a.time <= c.max_gap_s for a, b in itertools.pairwise(run))


@settings(max_examples=100, deadline=None)
@given(histories(), st.sampled_from(["PendingProposal", "ProposalReady", "Rebalancing", None]))
def test_property_never_two_at_once(h: tuple[list[Sample], float], phase: str | None) -> None:
    samples, now = h
    running = RebalanceView("other", finished=False, triggered=False, created=-1e6, phase=phase)
    assert decide(samples, cfg(window=0.0, cooldown=0.0), now, KNOWN3, [running]).create is None
