"""A stdio pass-through that records what reaches a server and what it answers.

Owns: the server-side record for the browser test. ``python recording_proxy.py LOG -- argv...``
starts ``argv`` and relays this process's stdin to it and its stdout back, writing every
line to ``LOG`` as ``> line`` (to the server) or ``< line`` (from it), flushed at once, so
a test can see that an app's ``tools/call`` reached the real server and what it answered.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import IO


def _pump(
    source: IO[bytes], sink: IO[bytes], log: IO[bytes], mark: bytes, lock: threading.Lock
) -> None:
    for line in iter(source.readline, b""):
        with lock:
            log.write(mark + line if line.endswith(b"\n") else mark + line + b"\n")
            log.flush()
        try:
            sink.write(line)
            sink.flush()
        except (BrokenPipeError, ValueError):
            return
    try:
        sink.close()
    except (BrokenPipeError, ValueError):
        pass


def main(argv: list[str]) -> int:
    log_path, dashdash, *command = argv
    assert dashdash == "--" and command, "usage: recording_proxy.py LOG -- argv..."
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    lock = threading.Lock()
    with open(log_path, "ab") as log:
        back = threading.Thread(
            target=_pump, args=(child.stdout, sys.stdout.buffer, log, b"< ", lock), daemon=True
        )
        back.start()
        _pump(sys.stdin.buffer, child.stdin, log, b"> ", lock)
        try:
            return child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            return child.wait(timeout=10)
        finally:
            back.join(timeout=5)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
