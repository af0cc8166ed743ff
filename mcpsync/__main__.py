"""``python -m mcpsync``: the same as the ``mcpsync`` console script (see mcpsync.cli)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
