"""The package version, in one place (a leaf: imports nothing).

Read by setup.cfg (``version = attr: mcpsync._version.__version__``), ``mcpsync.__version__``,
the HTTP ``User-Agent``, the ``clientInfo`` sent at initialize and ``mcpsync --version``.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
