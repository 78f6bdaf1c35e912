"""Copy the generated CRDs into the chart, and the BrokerCluster spec schema into its values schema.

Helm's ``.Files`` only reads files inside the chart, so the chart carries a copy of ``crds/``
(``charts/jbod-operator/files/crds/``, rendered by ``templates/crd-*.yaml``). The values schema's
``brokerCluster.spec`` is the CRD's spec schema, made strict (``additionalProperties: false``)
and without the Kubernetes extensions. Both are derived, never edited by hand:

    .venv/bin/python charts/sync_crds.py           # after `make crds`
    .venv/bin/python charts/sync_crds.py --check   # exit 1 when the chart is stale

tests/unit/test_chart_templates.py fails when they drift from ``crds/``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "crds"
CHART = REPO / "charts" / "jbod-operator"
TARGET = CHART / "files" / "crds"
VALUES_SCHEMA = CHART / "values.schema.json"
BROKER_CLUSTER_CRD = "jbod.io_brokerclusters.yaml"

# Kubernetes-only keywords (and defaults, which the API server applies) are left out.
K8S_PREFIX = "x-kubernetes-"


def to_json_schema(schema: Any) -> Any:
    """A CRD's structural schema as a strict JSON Schema (draft-07)."""
    if isinstance(schema, list):
        return [to_json_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "default" or key.startswith(K8S_PREFIX):
            continue
        if key == "properties":
            out[key] = {name: to_json_schema(sub) for name, sub in value.items()}
        else:
            out[key] = to_json_schema(value)
    if out.get("type") == "object" and "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def broker_cluster_spec_schema() -> dict[str, Any]:
    crd = yaml.safe_load((SOURCE / BROKER_CLUSTER_CRD).read_text(encoding="utf-8"))
    (version,) = [v for v in crd["spec"]["versions"] if v.get("storage")]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    result: dict[str, Any] = to_json_schema(spec)
    return result


def expected_files() -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(SOURCE.glob("*.yaml"))}


def expected_values_schema() -> str:
    schema = json.loads(VALUES_SCHEMA.read_text(encoding="utf-8"))
    schema["properties"]["brokerCluster"]["properties"]["spec"] = broker_cluster_spec_schema()
    return json.dumps(schema, indent=2) + "\n"


def problems() -> list[str]:
    """What differs between the chart and crds/ (empty when in sync)."""
    out = []
    want = expected_files()
    have = {p.name: p.read_bytes() for p in sorted(TARGET.glob("*.yaml"))}
    for name in sorted(want.keys() | have.keys()):
        if name not in have:
            out.append(f"{TARGET / name} is missing")
        elif name not in want:
            out.append(f"{TARGET / name} is not in crds/")
        elif want[name] != have[name]:
            out.append(f"{TARGET / name} differs from crds/{name}")
    if VALUES_SCHEMA.read_text(encoding="utf-8") != expected_values_schema():
        out.append(f"{VALUES_SCHEMA}: brokerCluster.spec differs from the BrokerCluster CRD")
    return out


def sync() -> None:
    TARGET.mkdir(parents=True, exist_ok=True)
    want = expected_files()
    for stale in TARGET.glob("*.yaml"):
        if stale.name not in want:
            stale.unlink()
    for name, data in want.items():
        (TARGET / name).write_bytes(data)
    VALUES_SCHEMA.write_text(expected_values_schema(), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report drift (exit 1)")
    args = parser.parse_args(argv)
    if args.check:
        found = problems()
        for p in found:
            print(p, file=sys.stderr)
        if found:
            print("run: .venv/bin/python charts/sync_crds.py", file=sys.stderr)
        return 1 if found else 0
    sync()
    return 0


if __name__ == "__main__":
    sys.exit(main())
