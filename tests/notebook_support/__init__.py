"""Helpers for ``tests/notebooks/test_notebooks.py`` (the notebooks themselves use nothing from ``tests/``).

Owns: nothing mcpsync ships. ``recording_server`` is the demo server plus a record of the
cancellations it received, for the kernel-interrupt test; ``fresh_venv`` makes a new venv
with ``mcpsync[notebooks]`` installed from a wheel of the checkout, for the fresh-venv test.
"""
