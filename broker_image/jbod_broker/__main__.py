"""Entry point: ``python -m jbod_broker --config server.properties`` (or ``jbod-broker``).

Exit codes: 0 after a graceful shutdown (SIGTERM/SIGINT flush and checkpoint every log dir),
2 for a configuration error (the message names the setting), 3 when no log dir is usable (at
start-up, or every one failed while running: a halt is never a clean exit, issue 14), 4 when
the process ran out of open files or memory while loading its log dirs (they are left as they
were: raise the limit and start again).
"""

from __future__ import annotations

import argparse
import os
import sys

from aiohttp import web

from .broker import Broker
from .config import ConfigError, load_config
from .logfmt import setup_logging
from .server import make_app, server_options
from .storage.errors import NoLiveLogDirError, ResourceShortageError


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="jbod-broker", description="JBOD log broker")
    ap.add_argument(
        "--config",
        default=os.environ.get("JBOD_CONFIG"),
        help="a Kafka-style properties file (JBOD_* environment variables override)",
    )
    ap.add_argument("--log-level", default=os.environ.get("JBOD_LOG_LEVEL", "INFO"))
    args = ap.parse_args(argv)
    if args.log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        print(f"jbod-broker: --log-level {args.log_level!r} is not a log level", file=sys.stderr)
        return 2
    try:
        config = load_config(args.config)
    except ConfigError as e:
        print(f"jbod-broker: configuration error: {e}", file=sys.stderr)
        return 2
    setup_logging(args.log_level.upper(), broker=config.broker_id)
    broker = Broker(config)
    try:
        web.run_app(
            make_app(broker),
            host=config.host,
            port=config.port,
            print=None,
            access_log=None,
            shutdown_timeout=10,
            **server_options(config),
        )
    except NoLiveLogDirError as e:
        print(f"jbod-broker: {e}", file=sys.stderr)
        return 3
    except ResourceShortageError as e:
        print(f"jbod-broker: cannot load the log dirs: {e}", file=sys.stderr)
        return 4
    if broker.halted:
        print(f"jbod-broker: stopped: {broker.halted}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
