"""Process-level concerns: which process owns an object, interpreter exit, the per-user folder.

Owns ``lifecycle`` (owner pid, fork detection, the exit hook that closes what is left with one
bound), ``logfork`` (no mcpsync thread inside a logging handler at ``os.fork()``),
``cachedir`` (the per-user folder and the one rule for making and opening files in it) and
``lazy`` (the PEP 562 rule the lazy packages share). Imports only ``errors``.
"""
