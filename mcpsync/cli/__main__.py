"""``python -m mcpsync.cli``: the same as the ``mcpsync`` console script."""

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
