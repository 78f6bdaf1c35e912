"""Fuzz of the broker's JSON API, driven by the broker's own ``/openapi.json``.

Bodies are generated from each endpoint's JSON schema (the pydantic wire models, as the broker
publishes them) by a small schema-to-Hypothesis translator below, then sent as they are or
mutated: a field dropped, an unknown one added, a value replaced by random JSON or by the
wrong type, the whole body replaced by random JSON or bytes, or the JSON cut short.

Property of every request: never a 5xx; a 4xx carries ``{"error", "message"}``; a 200 is
well formed; the broker stays ready with every log dir online; the seed partition's files are
byte for byte unchanged; and, except for controller requests (which may legitimately create
or delete other replicas), no replica folder appears or disappears.

Controller requests mostly carry the broker's current controller epoch (else they would all
be refused as stale once one generated epoch reached 2^31-1), and LeaderAndIsr states mostly
name this broker as leader and replica, so that replicas really get created.

Bounded and repeatable: about 300 examples (see ``EXAMPLES``), derandomized, no example
database, no shrinking (the broker keeps state between examples, so the first failing request
is the one reported, with its body and the broker's last log lines).

No request leaves loopback: every ``url`` and ``kafka_endpoint`` a body carries (broker
endpoints; a follower fetches from its leader's Kafka listener) is rewritten to a closed port
on 127.0.0.1, and long polls are cut to 100 ms so the run stays short.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.integration.test_broker_bad_input import (
    JSON_PATHS,
    SEED_TOPIC,
    BrokerHarness,
    Reply,
    Snapshot,
    disk_snapshot,
    listing,
    seed,
    sha256_file,
    short,
    snapshot_diff,
)

pytestmark = pytest.mark.integration

SAFE_URL = "http://127.0.0.1:1"
SAFE_KAFKA_ENDPOINT = "127.0.0.1:1"
"""Where every broker endpoint of a fuzzed body points: a closed port on loopback."""
MAX_FUZZ_WAIT_MS = 100
CONTROLLER = "/v1/controller/"
LEADER_AND_ISR = CONTROLLER + "leader-and-isr"
EXAMPLES = {
    LEADER_AND_ISR: 100,
    CONTROLLER + "stop-replica": 35,
    CONTROLLER + "update-metadata": 35,
}
"""Examples per endpoint (18 for the others, about 300 in all). Controller requests get more:
whether they apply depends on the controller epoch, and LeaderAndIsr creates replicas."""
# Controller endpoints last, LeaderAndIsr the very last: they may create state, and a broken
# LeaderAndIsr can take log dirs offline, which would fail every test after it.
FUZZ_PATHS = sorted(JSON_PATHS, key=lambda p: (p.startswith(CONTROLLER), p == LEADER_AND_ISR, p))
TOPIC_CONFIG_KEYS = [
    "segment.bytes",
    "segment.ms",
    "retention.bytes",
    "retention.ms",
    "index.interval.bytes",
    "max.message.bytes",
    "flush.messages",
]
"""Extra keys for string maps (LeaderAndIsr's topic configs): the ones the broker reads."""
ODD_STRINGS = [
    "",
    " ",
    "/",
    ".",
    "..",
    "../etc",
    "/etc",
    "/tmp",
    "a\x00b",
    "\ud800",
    "any",
    "%2e%2e",
    "é",
    "null",
    "0",
    "-1",
    "1",
    "64",
    "1048576",
    "abc",
    "9" * 30,
]

FUZZ_SETTINGS = settings(
    max_examples=18,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
    print_blob=False,
)

Strategy = st.SearchStrategy[Any]


# --------------------------------------------------------------------------------------------
# JSON schema -> strategy (the subset pydantic emits; anything else fails loudly)
# --------------------------------------------------------------------------------------------

KEYWORDS = frozenset(
    {
        "$ref",
        "anyOf",
        "type",
        "properties",
        "required",
        "additionalProperties",
        "maxProperties",
        "items",
        "minItems",
        "maxItems",
        "minLength",
        "maxLength",
        "pattern",
        "minimum",
        "maximum",
    }
)
ANNOTATIONS = frozenset({"title", "description", "default", "$defs"})


class SchemaStrategies:
    """Hypothesis strategies for values valid against a JSON schema document.

    ``pattern_extras`` are extra values for patterned strings (known topic names), and
    ``string_extras`` for free strings (paths that must be refused).
    """

    def __init__(
        self,
        root: dict[str, Any],
        *,
        pattern_extras: list[str] | None = None,
        string_extras: list[str] | None = None,
    ) -> None:
        self.root = root
        self.pattern_extras = pattern_extras or []
        self.string_extras = [*ODD_STRINGS, *(string_extras or [])]
        self._refs: dict[str, Strategy] = {}

    def resolve(self, ref: str) -> dict[str, Any]:
        assert ref.startswith("#/"), f"only local references are supported: {ref}"
        node: Any = self.root
        for part in ref[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        assert isinstance(node, dict), ref
        return node

    def of(self, schema: dict[str, Any]) -> Strategy:
        unknown = set(schema) - KEYWORDS - ANNOTATIONS
        if unknown:
            raise AssertionError(
                f"schema keyword(s) {sorted(unknown)} are not supported by the fuzz test's "
                f"generator: teach SchemaStrategies about them ({schema})"
            )
        if "$ref" in schema:
            ref = schema["$ref"]
            if ref not in self._refs:
                self._refs[ref] = st.deferred(lambda: self.of(self.resolve(ref)))
            return self._refs[ref]
        if "anyOf" in schema:
            return st.one_of([self.of(s) for s in schema["anyOf"]])
        kind = schema.get("type")
        if kind == "null":
            return st.none()
        if kind == "boolean":
            return st.booleans()
        if kind == "integer":
            lo = schema.get("minimum", -(2**63))
            hi = schema.get("maximum", 2**63 - 1)
            edges = sorted({v for v in (lo, hi, 0, 1, 2, lo + 1, hi - 1) if lo <= v <= hi})
            return st.one_of(st.integers(lo, hi), st.sampled_from(edges))
        if kind == "string":
            return self._string(schema)
        if kind == "array":
            lo = schema.get("minItems", 0)
            hi = min(schema.get("maxItems", lo + 3), lo + 3)
            return st.lists(
                self.of(schema.get("items", {"type": "null"})), min_size=lo, max_size=hi
            )
        if kind == "object":
            return self._object(schema)
        raise AssertionError(f"unsupported schema type {kind!r} in {schema}")

    def _string(self, schema: dict[str, Any]) -> Strategy:
        lo = schema.get("minLength", 0)
        hi = schema.get("maxLength", 10_000)
        pattern = schema.get("pattern")

        def fits(s: str) -> bool:
            return lo <= len(s) <= hi and (pattern is None or re.fullmatch(pattern, s) is not None)

        if pattern is not None:
            base = st.from_regex(pattern, fullmatch=True)
            longest = base.filter(bool).map(lambda s: (s * (hi // len(s) + 1))[:hi])
            options = [base, longest]
            if self.pattern_extras:
                options.append(st.sampled_from(self.pattern_extras))
            return st.one_of(options).filter(fits)
        return st.one_of(
            st.text(min_size=lo, max_size=min(hi, 24)),
            st.sampled_from([s for s in self.string_extras if lo <= len(s) <= hi]),
        ).filter(fits)

    def _object(self, schema: dict[str, Any]) -> Strategy:
        props: dict[str, Any] = schema.get("properties", {})
        required = set(schema.get("required", []))
        extra = schema.get("additionalProperties", True)
        if props:
            assert extra is False, f"mixed fixed and free properties: {schema}"
            return st.fixed_dictionaries(
                {k: self.of(v) for k, v in props.items() if k in required},
                optional={k: self.of(v) for k, v in props.items() if k not in required},
            )
        assert isinstance(extra, dict), f"free-form object without a value schema: {schema}"
        keys = st.one_of(st.text(max_size=16), st.sampled_from(TOPIC_CONFIG_KEYS))
        return st.dictionaries(
            keys, self.of(extra), max_size=min(schema.get("maxProperties", 3), 3)
        )


# --------------------------------------------------------------------------------------------
# Mutations
# --------------------------------------------------------------------------------------------

JSON_VALUES: Strategy = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def locations(value: Any) -> Iterator[tuple[Any, Any]]:
    """(container, key) of every value nested in ``value``."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield value, k
            yield from locations(v)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield value, i
            yield from locations(v)


def wrong_types(v: Any) -> list[Any]:
    if isinstance(v, bool):
        return [0, 1, "true", None, [v]]
    if isinstance(v, int):
        return [str(v), float(v), True, -1, -(2**63) - 1, 2**63, 2**64, None, [v], {"v": v}]
    if isinstance(v, str):
        return [0, None, [v], {"v": v}, v * 5, True]
    if isinstance(v, list):
        return [{}, None, "x", [None], [[]], 0]
    if isinstance(v, dict):
        return [[], None, "x", 0, [v]]
    return [0, "", [], {}, False]


MUTATIONS = [
    "valid",
    "valid",
    "valid",
    "drop-field",
    "unknown-field",
    "random-value",
    "wrong-type",
    "random-json",
    "random-bytes",
    "cut-short",
]


@st.composite
def request_bodies(draw: st.DrawFn, valid: Strategy) -> tuple[str, Any]:
    """(what was done, a JSON-able body or raw bytes) from a valid body."""
    body = draw(valid)
    how = draw(st.sampled_from(MUTATIONS))
    if how == "random-json":
        return how, draw(JSON_VALUES)
    if how == "random-bytes":
        return how, draw(st.binary(max_size=64))
    if how == "cut-short":
        data = json.dumps(body).encode()
        return how, data[: draw(st.integers(0, len(data) - 1))]
    if how == "valid":
        return how, body
    spots = list(locations(body))
    if how == "drop-field":
        spots = [(c, k) for c, k in spots if isinstance(c, dict)]
    if how == "unknown-field":
        spots = [(c, None) for c, _ in spots if isinstance(c, dict)]
        if isinstance(body, dict):
            spots.append((body, None))
    if not spots:
        return "random-json", draw(JSON_VALUES)
    container, key = draw(st.sampled_from(spots))
    if how == "drop-field":
        del container[key]
    elif how == "unknown-field":
        name = draw(st.text(min_size=1, max_size=10).filter(lambda k: k not in container))
        container[name] = draw(JSON_VALUES)
    elif how == "random-value":
        container[key] = draw(JSON_VALUES)
    else:
        container[key] = draw(st.sampled_from(wrong_types(container[key])))
    return f"{how}[{key!r}]", body


def keep_on_loopback(value: Any) -> None:
    """Point every broker endpoint at a closed loopback port; cut long polls short."""
    for container, key in list(locations(value)):
        v = container[key]
        if key == "url" and isinstance(v, str):
            container[key] = SAFE_URL
        elif key == "kafka_endpoint" and isinstance(v, str):
            container[key] = SAFE_KAFKA_ENDPOINT
        elif key == "max_wait_ms" and isinstance(v, int) and not isinstance(v, bool) and v > 0:
            container[key] = min(v, MAX_FUZZ_WAIT_MS)


# --------------------------------------------------------------------------------------------
# The fuzzer
# --------------------------------------------------------------------------------------------


class Fuzzer:
    def __init__(self, h: BrokerHarness) -> None:
        self.h = h
        r = h.request("GET", "/openapi.json", auth=None, content_type=None)
        assert r.status == 200, r
        self.spec: dict[str, Any] = r.json()
        home = [os.path.join(d, f"{SEED_TOPIC}-0") for d in h.log_dirs]
        self.seed_dir = next(p for p in home if os.path.isdir(p))
        self.seed_before = self.seed_state()
        self.failure: str | None = None
        """The first failure of the current test: Hypothesis replays the failing example to
        report it, and the broker, which keeps state, may not fail the same way twice."""
        self.last = ""
        """The request being checked, for the failure message."""

    def valid_bodies(self, path: str) -> Strategy:
        d1 = self.h.log_dirs[1]
        # Paths next to a configured log dir; never the dir itself, nor an alias of it such as
        # a trailing slash: a move to it would be legitimate and change the seed's files.
        near_misses = [
            d1 + "/../x",
            d1 + "/.",
            d1 + "/sub",
            "/" + d1.lstrip("/").upper(),
        ]
        # Controller requests never name the seed topic: they may legitimately change what
        # they name, and the seed partition must stay byte for byte the same.
        topics = [] if path.startswith(CONTROLLER) else [SEED_TOPIC]
        post = self.spec["paths"][path]["post"]
        schema = post["requestBody"]["content"]["application/json"]["schema"]
        root = self.spec
        gen = SchemaStrategies(root, pattern_extras=topics, string_extras=near_misses)
        return gen.of(schema)

    def seed_state(self) -> Snapshot:
        """The seed partition's files, and each log dir's meta.properties."""
        meta = [os.path.join(d, "meta.properties") for d in self.h.log_dirs]
        return {**disk_snapshot([self.seed_dir]), **{m: (sha256_file(m),) for m in meta}}

    def replica_folders(self) -> set[str]:
        return {
            os.path.join(d, n)
            for d in self.h.log_dirs
            for n in listing(d)
            if os.path.isdir(os.path.join(d, n)) and not n.endswith("-delete")
        }

    def controller_epoch(self) -> int:
        r = self.h.request("GET", "/v1/data/metadata", content_type=None)
        assert r.status == 200, r
        epoch: int = r.json()["controller_epoch"]
        return epoch

    def send(self, path: str, how: str, body: Any, epoch: str, aim: str) -> None:
        if self.failure is not None:
            raise AssertionError(self.failure)
        self.last = f"POST {path} ({how}): not sent"
        try:
            self._send(path, how, body, epoch, aim)
        except (AssertionError, OSError, ValueError) as e:
            self.failure = (
                f"{self.last}\n{type(e).__name__}: {e}\n--- broker log ---\n{self.h.broker.tail(6)}"
            )
            raise AssertionError(self.failure) from e

    def _send(self, path: str, how: str, body: Any, epoch: str, aim: str) -> None:
        h = self.h
        if isinstance(body, bytes):
            data = body
        else:
            keep_on_loopback(body)
            if (
                epoch != "generated"
                and path.startswith(CONTROLLER)
                and isinstance(body, dict)
                and type(body.get("controller_epoch")) is int
            ):
                # Most controller requests carry the current epoch, so that they are applied
                # rather than refused as stale (a generated epoch soon reaches 2^31-1).
                current = max(self.controller_epoch(), 0)
                body["controller_epoch"] = current if epoch == "current" else max(current - 1, 0)
            if aim == "this-broker" and path.startswith(CONTROLLER):
                aim_at_this_broker(body)
            data = json.dumps(body).encode()
        folders = self.replica_folders()
        around = (listing(h.base_dir), listing(h.broker.home))
        what = self.last = f"POST {path} ({how}) {data[:3000]!r}"
        reply = h.request("POST", path, data, timeout=10)
        what = self.last = f"{what}\n-> {reply}"
        check_reply(path, reply, what)
        try:
            h.assert_serving()
        except AssertionError as e:
            raise AssertionError(f"{what}\nleft the broker unhealthy: {e}") from e
        seed_now = self.seed_state()
        assert seed_now == self.seed_before, (
            f"{what}\nchanged the seed partition's files:\n"
            + snapshot_diff(self.seed_before, seed_now)
        )
        assert (listing(h.base_dir), listing(h.broker.home)) == around, what
        if not path.startswith(CONTROLLER):
            after = self.replica_folders()
            assert after == folders, (
                f"{what}\nchanged replica folders: +{sorted(after - folders)} "
                f"-{sorted(folders - after)}"
            )


def aim_at_this_broker(body: Any) -> None:
    """Make broker 0 the leader and a replica of every partition state of a LeaderAndIsr, so
    that it creates their logs (random broker ids would almost never name it)."""
    parts = body.get("partitions") if isinstance(body, dict) else None
    for p in parts if isinstance(parts, list) else []:
        if not isinstance(p, dict):
            continue
        if type(p.get("leader")) is int:
            p["leader"] = 0
        replicas = p.get("replicas")
        if isinstance(replicas, list) and replicas and type(replicas[0]) is int:
            replicas[0] = 0


def check_reply(path: str, reply: Reply, what: str) -> None:
    assert reply.status < 500, f"{what}\nis a server error"
    if reply.status >= 400:
        ok = reply.headers.get("content-type", "").startswith("application/json")
        try:
            body = reply.json() if ok else None
        except ValueError:
            body = None
        ok = (
            isinstance(body, dict)
            and isinstance(body.get("error"), str)
            and re.fullmatch(r"[A-Z][A-Z_]+", body["error"]) is not None
            and isinstance(body.get("message"), str)
            and body["message"].strip() != ""
        )
        assert ok, f"{what}\nis not a JSON error with a Kafka error name and a reason"
        return
    assert reply.status == 200, what
    json.loads(reply.body)


@pytest.fixture(scope="module")
def fuzzer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fuzzer]:
    harness = BrokerHarness(tmp_path_factory.mktemp("fuzz"))
    with harness.running():
        seed(harness)
        yield Fuzzer(harness)


def test_fuzz_covers_every_json_endpoint_of_openapi(fuzzer: Fuzzer) -> None:
    assert set(fuzzer.spec["paths"]) == set(FUZZ_PATHS)


@pytest.mark.parametrize("path", FUZZ_PATHS, ids=short)
def test_fuzz_json_endpoint(fuzzer: Fuzzer, path: str) -> None:
    try:
        fuzzer.h.assert_serving()
    except AssertionError as e:
        pytest.fail(f"the broker is unhealthy after an earlier fuzz test (see its failure): {e}")
    bodies = request_bodies(fuzzer.valid_bodies(path))
    fuzzer.failure = None
    examples = EXAMPLES.get(path, FUZZ_SETTINGS.max_examples)

    @settings(FUZZ_SETTINGS, max_examples=examples)
    @given(
        req=bodies,
        epoch=st.sampled_from(["current", "current", "stale", "generated"]),
        aim=st.sampled_from(["this-broker", "this-broker", "as-generated"]),
    )
    def run(req: tuple[str, Any], epoch: str, aim: str) -> None:
        how, body = req
        fuzzer.send(path, how, body, epoch, aim)

    run()
    # The seed partition still serves its data.
    assert fuzzer.h.log_end_offset() == 6
