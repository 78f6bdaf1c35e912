"""The scale harness's own rules (issue 39): what the stub brokers count as "told" and "leads",
and how the API proxy names a request. A bench that miscounted would report a failover done
before it was, so the counts are checked here, without processes."""

from __future__ import annotations

from tests.api_proxy import classify
from tests.stub_brokers import Cluster


def part(p: int, leader: int, epoch: int, topic: str = "t") -> dict[str, object]:
    return {"topic": topic, "partition": p, "leader": leader, "leader_epoch": epoch}


def test_told_and_leads_follow_each_brokers_latest_record() -> None:
    c = Cluster()
    c.record(1, 1, [part(0, 1, 0), part(1, 2, 0)], now=1.0)
    c.record(2, 1, [part(0, 1, 0), part(1, 2, 0)], now=1.0)
    assert c.told_counts == {1: 2, 2: 2}
    assert c.leads[1] == {1: 1} and c.leads[2] == {1: 1}
    # A new controller epoch re-tells broker 1 the same partitions: counted once, new epoch.
    c.record(1, 2, [part(0, 1, 0), part(1, 2, 0)], now=2.0)
    assert c.told_counts[1] == 2
    assert +c.told_by_epoch[1] == {2: 2}
    assert +c.leads[1] == {2: 1}


def test_the_best_view_moves_only_to_a_higher_leader_epoch() -> None:
    c = Cluster()
    c.record(1, 1, [part(0, 1, 0)], now=1.0)
    c.record(2, 1, [part(0, 2, 1)], now=2.0)  # broker 2 elected (epoch 1)
    assert +c.best_leaders == {2: 1} and c.best_changed_at == 2.0
    c.record(1, 1, [part(0, 1, 0)], now=3.0)  # a stale record changes nothing
    assert +c.best_leaders == {2: 1} and c.best_changed_at == 2.0


def test_the_proxy_names_verbs_and_resources() -> None:
    ns = "/apis/jbod.io/v1alpha1/namespaces/x"
    assert classify("GET", f"{ns}/partitionshards", {}) == ("LIST", "partitionshards")
    assert classify("GET", f"{ns}/topics", {"watch": "true"}) == ("WATCH", "topics")
    assert classify("GET", f"{ns}/topics/a", {}) == ("GET", "topics")
    assert classify("PATCH", f"{ns}/topics/a/status", {}) == ("PATCH", "topics/status")
    assert classify("PUT", "/api/v1/namespaces/x/secrets/s", {}) == ("PUT", "secrets")
