"""sseclient-py against mcpsync's own event-stream parser (``mcpsync/transports/http/sse.py``).

Why this exists: the design mcpsync started from named ``sseclient-py``; docs/development.md "Dependencies"
says why it is not used, with the figures this script prints. Each case feeds the same bytes,
cut into 64 KiB chunks (what the HTTP transports read at a time), to both parsers:

- one event whose ``data:`` line is 10 MB (time and peak memory);
- mixed line endings (CRLF, CR and LF, a blank line of another kind than the field line);
- a ``retry``-only event, and an ``id``-only event (no ``data`` line at all);
- the MCP priming event: ``id: x`` + an empty ``data:`` line.

Run::

    .venv/bin/python benchmarks/sse_parsers.py          # needs: pip install sseclient-py==1.9.0

No network and no server: pure parsing. Exit 0 whatever the figures; 2 when sseclient-py is
not installed (it is no dependency of mcpsync).
"""

from __future__ import annotations

import importlib.metadata
import sys
import time
import tracemalloc
from collections.abc import Iterator
from typing import Any

from mcpsync.transports.http.sse import SSEEvent, SSEParser

CHUNK = 64 * 1024  # the transports' _READ_CHUNK


def chunks(body: bytes, size: int = CHUNK) -> Iterator[bytes]:
    for start in range(0, len(body), size):
        yield body[start : start + size]


def ours(body: bytes) -> tuple[list[tuple[str, str, str | None]], dict[str, Any]]:
    """Events (type, data, id) and the state that outlives them, from mcpsync's parser."""
    parser = SSEParser()
    events = []
    for chunk in chunks(body):
        for ev in parser.feed(chunk):
            assert isinstance(ev, SSEEvent)
            events.append((ev.event, ev.data.decode(), ev.id))
    parser.finish()
    return events, {"last_event_id": parser.last_event_id, "retry_s": parser.retry}


def theirs(body: bytes) -> tuple[list[tuple[str, str, str | None]], dict[str, Any]]:
    """The same from sseclient-py (its only state is on the events it dispatches)."""
    import sseclient

    client = sseclient.SSEClient(chunks(body))
    events = []
    retry = None
    for ev in client.events():
        events.append((ev.event, ev.data, ev.id))
        retry = ev.retry if ev.retry is not None else retry
    return events, {"last_event_id": events[-1][2] if events else None, "retry": retry}


def timed(fn: Any, body: bytes, rounds: int) -> tuple[float, int, Any]:
    """Best wall time of ``rounds`` runs, peak traced memory of one more run, its result."""
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn(body)
        best = min(best, time.perf_counter() - t0)
    tracemalloc.start()
    result = fn(body)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return best, peak, result


def show(label: str, body: bytes) -> None:
    print(f"\n{label}\n  bytes: {body!r}")
    for name, fn in (("mcpsync", ours), ("sseclient-py", theirs)):
        events, state = fn(body)
        print(f"  {name:13s} events={events} state={state}")


def main() -> int:
    try:
        version = importlib.metadata.version("sseclient-py")
    except importlib.metadata.PackageNotFoundError:
        print("sseclient-py is not installed: pip install sseclient-py==1.9.0", file=sys.stderr)
        return 2
    print(f"sseclient-py {version}, Python {sys.version.split()[0]}, {CHUNK // 1024} KiB chunks")

    big = b"data: " + b"x" * (10 * 1000 * 1000) + b"\n\n"
    print("\none event with a 10 MB data line (best of 3; peak memory traced on a 4th run)")
    for name, fn in (("mcpsync", ours), ("sseclient-py", theirs)):
        seconds, peak, (events, _) = timed(fn, big, 3)
        size = len(events[0][1]) if events else 0
        print(
            f"  {name:13s} {seconds * 1000:8.1f} ms   peak {peak / 1e6:6.1f} MB   "
            f"events={len(events)} data={size} bytes"
        )

    show(
        "mixed line endings: a CRLF field line closed by an LF blank line, an LF line closed "
        "by CRLF, a CR line closed by CRLF (3 events expected)",
        b"data: one\r\n\ndata: two\n\r\ndata: three\r\r\n",
    )
    show(
        "a retry-only event, then an event (retry 3000 ms expected)",
        b"retry: 3000\n\ndata: after\n\n",
    )
    show(
        "an id-only event, then the stream ends (last event id 7 expected, for Last-Event-ID)",
        b"id: 7\n\n",
    )
    show(
        "MCP priming event: id + empty data (dispatched with empty data and its id, per spec)",
        b"id: prime-1\ndata:\n\n",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
