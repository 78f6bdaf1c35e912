"""A cluster snapshot: what the planner reads. Pydantic models, JSON on disk (one cluster).

Built by :func:`jbod_operator.plan.snapshot.build_snapshot` from the brokers'
describe-log-dirs answers and the Topic statuses (by the operator for a Rebalance, or by
``python -m jbod_spark.collect``). It lives with the operator's models, not in the planner, so
the operator writes the snapshot a Spark job reads without importing Spark. A fleet of
clusters is stored as Parquet tables instead (see :mod:`jbod_spark.frames`); both become the
same columnar ``jbod_spark.arrays.ClusterArrays`` before planning.

Fields are camelCase in JSON, snake_case in Python (like the project's custom resources).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from .common import CamelModel

NonNegInt = Annotated[int, Field(ge=0)]


class BrokerInfo(CamelModel):
    id: NonNegInt
    rack: str | None = None
    live: bool = True


class LogDirInfo(CamelModel):
    broker_id: NonNegInt
    name: Annotated[str, Field(min_length=1)]
    path: Annotated[str, Field(min_length=1)]
    capacity_bytes: NonNegInt
    used_bytes: NonNegInt
    """Everything on the volume (capacity minus usable bytes), replicas or not."""
    live: bool = True
    cordoned: bool = False


class ReplicaInfo(CamelModel):
    topic: Annotated[str, Field(min_length=1)]
    partition: NonNegInt
    broker_id: NonNegInt
    log_dir: Annotated[str, Field(min_length=1)]
    """The path (or name) of one of the broker's log dirs."""
    size_bytes: NonNegInt
    leader: bool = False


class PartitionLoad(CamelModel):
    topic: str
    partition: NonNegInt
    bytes_in_per_second: Annotated[float, Field(ge=0)] = 0.0
    growth_bytes_per_second: float = 0.0
    """A high percentile of the partition's growth (from the metric history); may be < 0."""


class ClusterSnapshot(CamelModel):
    """One cluster. The order of ``replicas`` within a partition is its replica list order."""

    cluster_name: Annotated[str, Field(min_length=1)]
    namespace: str = "default"
    captured_at: str | None = None
    brokers: list[BrokerInfo]
    log_dirs: list[LogDirInfo]
    replicas: list[ReplicaInfo] = Field(default_factory=list)
    partition_loads: list[PartitionLoad] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> ClusterSnapshot:
        ids = [b.id for b in self.brokers]
        if len(set(ids)) != len(ids):
            raise ValueError("broker ids must be unique")
        known = set(ids)
        refs: set[tuple[int, str]] = set()
        for d in self.log_dirs:
            if d.broker_id not in known:
                raise ValueError(f"log dir {d.path} names unknown broker {d.broker_id}")
            for ref in {d.path, d.name}:
                if (d.broker_id, ref) in refs:
                    raise ValueError(f"broker {d.broker_id}: log dir {ref!r} is listed twice")
                refs.add((d.broker_id, ref))
        seen: set[tuple[str, int, int]] = set()
        leaders: set[tuple[str, int]] = set()
        for r in self.replicas:
            if (r.broker_id, r.log_dir) not in refs:
                raise ValueError(
                    f"{r.topic}-{r.partition}: broker {r.broker_id} has no log dir {r.log_dir!r}"
                )
            key = (r.topic, r.partition, r.broker_id)
            if key in seen:
                raise ValueError(f"{r.topic}-{r.partition} has two replicas on {r.broker_id}")
            seen.add(key)
            if r.leader:
                if (r.topic, r.partition) in leaders:
                    raise ValueError(f"{r.topic}-{r.partition} has two leaders")
                leaders.add((r.topic, r.partition))
        return self

    def dump_json(self) -> str:
        return self.model_dump_json(by_alias=True, indent=1)
