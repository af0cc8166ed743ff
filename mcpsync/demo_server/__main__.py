"""``python -m mcpsync.demo_server``: the demo server on stdio (see ``mcpsync.demo_server``)."""

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
