"""Helpers the notebooks in ``notebooks/`` (and ``tests/test_notebooks.py``) use to start local peers.

Owns: nothing mcpsync ships. ``recording_server`` is the demo server plus a record of the
cancellations it received; ``local_servers`` starts the HTTP and OAuth peers on 127.0.0.1.
Import with ``tests/`` on ``sys.path`` (pytest does that; the notebooks do it themselves).
"""
