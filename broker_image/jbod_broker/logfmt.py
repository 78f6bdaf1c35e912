"""Structured logs: one JSON object per line, with the ``extra`` fields a call site passes.

Call sites log an event name and its fields (``log.info("...", extra={"event": ..., ...})``);
this formatter keeps them as keys, so a log pipeline can filter on ``event`` or ``partition``.
"""

from __future__ import annotations

import json
import logging
import sys
import time

_NOISE = {"settings", "k8s_skip", "k8s_ref"}  # kopf's own record extras, not for humans
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def __init__(self, **static: object) -> None:
        super().__init__()
        self.static = static

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            **self.static,
        }
        for k, v in vars(record).items():
            if k not in _STANDARD and not k.startswith("_") and k not in _NOISE:
                out[k] = v if isinstance(v, str | int | float | bool | None) else str(v)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out)


def setup_logging(level: str = "INFO", **static: object) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(**static))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
