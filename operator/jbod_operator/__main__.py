"""``python -m jbod_operator`` (or ``jbod-operator``): run the operator.

Run several replicas: one is active (it holds the Lease, see leadership.py), the others
stand by. Settings come from JBOD_OPERATOR_* variables (see settings.py).
"""

from __future__ import annotations

import sys

import kopf

from jbod_broker.logfmt import setup_logging

from .settings import SettingsError, load_settings


def main() -> int:
    try:
        cfg = load_settings()
    except SettingsError as e:
        print(f"jbod-operator: configuration error: {e}", file=sys.stderr)
        return 2
    from . import main as _handlers  # noqa: F401  (registers the handlers)

    setup_logging(cfg.log_level_name, component="operator")

    if cfg.namespace:
        kopf.run(standalone=True, namespaces=[cfg.namespace])
    else:
        kopf.run(standalone=True, clusterwide=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
