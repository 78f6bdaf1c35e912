"""``python -m jbod_operator.tools.cli``: the same tool as the ``jbod-ctl`` console script, for
environments where the script is not on PATH (or not installed)."""

from __future__ import annotations

import sys

from .app import main

if __name__ == "__main__":
    sys.exit(main())
