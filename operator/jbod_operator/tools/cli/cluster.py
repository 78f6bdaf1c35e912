"""``jbod-ctl cluster bootstrap-servers NAME``: where Kafka clients connect (issue 18).

Prints the ``bootstrap.servers`` of a BrokerCluster: every broker's Kafka listener under its
pod's name in the headless Service, the names the brokers advertise in Metadata. A client
outside the cluster needs those names to resolve (a port-forward or a network route is the
platform's business); one reachable broker is enough to bootstrap, Metadata names the rest.
"""

from __future__ import annotations

import argparse

from pydantic import ValidationError

from ...models import BrokerCluster
from ...plan.builders import kafka_bootstrap_servers
from .common import CliError
from .kubectl import KubectlError, add_kube_options, kubectl_from_args

RESOURCE = "brokerclusters.jbod.io"


def cmd_bootstrap_servers(ns: argparse.Namespace) -> int:
    kubectl = kubectl_from_args(ns)
    try:
        raw = kubectl.get_json(RESOURCE, ns.name)
    except KubectlError as e:
        if not e.not_found:
            raise
        where = f" in namespace {kubectl.namespace}" if kubectl.namespace else ""
        raise CliError(f"BrokerCluster {ns.name} not found{where}") from None
    try:
        bc = BrokerCluster.model_validate(raw)
    except ValidationError as e:
        raise CliError(f"BrokerCluster {ns.name} is not valid: {e.errors()[0]['msg']}") from None
    print(kafka_bootstrap_servers(bc))
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``cluster bootstrap-servers``."""
    cl = sub.add_parser("cluster", help="facts about a BrokerCluster for its clients")
    cl_sub = cl.add_subparsers(dest="action", required=True, metavar="ACTION")
    bs = cl_sub.add_parser(
        "bootstrap-servers",
        help="the Kafka bootstrap.servers of a BrokerCluster",
        description="Print every broker's Kafka listener (HOST:PORT, comma-separated), as a "
        "Kafka client's bootstrap.servers.",
    )
    bs.add_argument("name", metavar="NAME")
    add_kube_options(bs)
