"""``python -m refzarr``: the ``refzarr`` command, where its script is not on PATH."""

from __future__ import annotations

import sys

from refzarr.cli import main

if __name__ == "__main__":
    sys.exit(main())
