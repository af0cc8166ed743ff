"""Cold start: a fresh interpreter from its first statement to the first typed result.

    .venv/bin/python benchmarks/coldstart.py [--reps N] [--json out.json]

Rows (each the median over ``--reps`` fresh processes, the rows interleaved per rep so a
load change hits every row alike):

* ``mcpsync``: ``import mcpsync`` + ``Session.connect([python, -m, mcpsync.demo_server])``
  + the first ``call_tool("echo")`` result (a validated ``mcp_types.CallToolResult``), with
  the import part (``import mcpsync`` and the session layer its ``Session`` name loads) and
  the ``connect`` part of the same processes, and the client
  process's CPU time (all threads, interpreter start-up included): it moves much less with
  the machine's load than the wall times do.
* ``mcpsync, eager mcp_types``: the same, but ``import mcp_types`` in the main thread right
  after ``import mcpsync`` (nothing overlapped with the server's start-up): what the
  background import at ``connect`` buys.
* ``bare``: a stdlib loop (json + pipes, no validation): the floor the server's start-up sets.
* ``sdk``: the official ``mcp`` client (``ClientSession`` over ``stdio_client``).
* imports alone (wall and CPU time of the import): ``import mcpsync`` (the package alone:
  its errors; every other name loads on first use), ``import mcpsync`` + ``mcpsync.Session``
  (what a script that connects imports first), the same after ``import mcp_types`` (the part
  that is mcpsync's own: what the two share, such as ``typing``, ``dataclasses`` or
  ``inspect``, is loaded already); ``import pydantic`` + plain ``import mcp_types``;
  ``import mcp.client.session`` and ``from mcp import Client`` (the official SDK).

* how fast the machine is during the run: the ``bare``, ``sdk`` and ``import pydantic +
  mcp_types (plain)`` rows, none of which runs mcpsync's code. On the shared VMs this
  project runs on they moved by up to 55% within an hour (2026-12-02: the plain import 151
  -> 238 ms), every other row with them, while a pure-Python loop's time did not move at
  all: the import-heavy work is what slows (memory, page faults), so no CPU loop can stand
  for it.
* ``--against TREE`` (another checkout, e.g. ``git worktree add /tmp/old HEAD~3``): the
  ``mcpsync`` row again with that tree's package (and its demo server), interleaved with the
  others: an A/B of two versions in the same minutes, which the machine's drift does not
  blur.

Target (issue 27 point 5): ``mcpsync`` (import, connect, first typed result) <= 0.5x of
``from mcp import Client`` alone, both medians of the same run. The figures move with the
load of the machine: compare rows of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench  # noqa: E402 - the benchmark's stdio server, child runner and cold programs

#: the mcpsync row over the SDK's import row, at most
TARGET_RATIO = 0.5
SDK_IMPORT = "from mcp import Client (official SDK)"

_MCPSYNC = """
import time; t0 = time.perf_counter()
{setup}
import sys, mcpsync
Session = mcpsync.Session  # the session layer loads on first use of the name
t1 = time.perf_counter()
{eager}
s = Session.connect({argv!r})
t2 = time.perf_counter()
assert s.call_tool("echo", {{"message": "hello"}}).content[0].text == "hello"
t3 = time.perf_counter()
print(t3 - t0, t1 - t0, t2 - t1, time.process_time(), flush=True)
s.close()
"""

#: label -> (what is imported first, untimed; what is timed)
_IMPORTS = {
    "import mcpsync (the package alone)": ("", "import mcpsync"),
    "import mcpsync + mcpsync.Session": ("", "import mcpsync; mcpsync.Session"),
    "the same after mcp_types (own part)": ("import mcp_types", "import mcpsync; mcpsync.Session"),
    "import pydantic + mcp_types (plain)": ("", "import mcp_types"),
    "import mcp.client.session (official SDK)": ("", "import mcp.client.session"),
    SDK_IMPORT: ("", "from mcp import Client"),
}


def _programs(argv: list[str]) -> dict[str, str]:
    init = bench.INIT_PARAMS
    cold = {
        "mcpsync": _MCPSYNC.format(argv=argv, eager="", setup=""),
        "mcpsync, eager mcp_types": _MCPSYNC.format(argv=argv, eager="import mcp_types", setup=""),
        "bare": bench._COLD["bare"].format(argv=argv, init=init),
        "sdk": bench._COLD["sdk"].format(argv0=argv[0], args=argv[1:]),
    }
    for label, (before, stmt) in _IMPORTS.items():
        cold[label] = (
            f"import time\n{before}\nt, c = time.perf_counter(), time.process_time()\n{stmt}\n"
            "print(time.perf_counter() - t, time.process_time() - c)"
        )
    return cold


def _once(code: str, cwd: str | None = None) -> list[float] | str:
    rc, out, err = bench._run_child([bench.PYTHON, "-c", code], 60.0, cwd=cwd)
    try:
        return [float(x) for x in out.strip().splitlines()[-1].split()]
    except (ValueError, IndexError):
        return f"failed (exit {rc}): {err.strip()[-200:]}"


def measure(
    reps: int, argv: list[str], against: str | None = None
) -> dict[str, dict[str, float] | str]:
    programs = _programs(argv)
    cwds: dict[str, str] = {}
    if against is not None:  # the same program, run where `against`'s mcpsync is the one found
        label = f"mcpsync at {against}"
        programs = {**programs, label: programs["mcpsync"]}
        cwds[label] = against
    samples: dict[str, list[list[float]]] = {label: [] for label in programs}
    failed: dict[str, str] = {}
    labels = list(programs)
    for rep in range(reps):
        order = labels[rep % len(labels) :] + labels[: rep % len(labels)]
        for label in order:
            if label in failed:
                continue
            got = _once(programs[label], cwds.get(label))
            if isinstance(got, str):
                failed[label] = got
            else:
                samples[label].append(got)
    out: dict[str, dict[str, float] | str] = {}
    for label in labels:
        if label in failed:
            out[label] = failed[label]
            continue
        columns = list(zip(*samples[label], strict=True))
        row = {"total_ms": 1000 * statistics.median(columns[0])}
        if len(columns) == 4:
            row["import_ms"] = 1000 * statistics.median(columns[1])
            row["connect_ms"] = 1000 * statistics.median(columns[2])
        if len(columns) in (2, 4):  # the CPU time of the process, or of the import alone
            row["cpu_ms"] = 1000 * statistics.median(columns[-1])
        out[label] = row
    return out


def render(results: dict[str, dict[str, float] | str], reps: int) -> str:
    lines = [f"cold start, median of {reps} fresh processes (load: {bench._uptime()})", ""]
    lines.append(f"{'row':44} {'total ms':>9} {'import':>8} {'connect':>8} {'CPU ms':>8}")
    for label, row in results.items():
        if isinstance(row, str):
            lines.append(f"{label:44} {row}")
            continue
        parts = [f"{row['total_ms']:9.0f}"]
        if "import_ms" in row:
            parts += [f"{row[k]:8.0f}" for k in ("import_ms", "connect_ms", "cpu_ms")]
        elif "cpu_ms" in row:
            parts += [" " * 17, f"{row['cpu_ms']:8.0f}"]
        lines.append(f"{label:44} " + " ".join(parts))
    ours = results.get("mcpsync")
    sdk = results.get(SDK_IMPORT)
    if isinstance(ours, dict) and isinstance(sdk, dict):
        ratio = ours["total_ms"] / sdk["total_ms"]
        verdict = "met" if ratio <= TARGET_RATIO else "NOT met"
        lines += [
            "",
            f"mcpsync / {SDK_IMPORT}: {ratio:.2f}x (target <= {TARGET_RATIO:g}x: {verdict})",
        ]
    if isinstance(ours, dict):
        eager = results.get("mcpsync, eager mcp_types")
        if isinstance(eager, dict):
            lines.append(f"mcpsync / eager mcp_types: {ours['total_ms'] / eager['total_ms']:.2f}x")
        for label, row in results.items():
            if label.startswith("mcpsync at ") and isinstance(row, dict):
                lines.append(f"mcpsync / {label}: {ours['total_ms'] / row['total_ms']:.2f}x")
    return "\n".join(lines)


def _compile_mcpsync() -> None:
    """Byte-compile mcpsync first, as ``pip install`` of the wheel does: in a checkout with
    ``PYTHONDONTWRITEBYTECODE`` set, modules never imported without it have no ``.pyc``,
    and compiling their source each time (measured: ~8 ms for the stdio transport's seven
    modules) would be counted as cold-start cost no installed user pays."""
    import compileall

    import mcpsync

    compileall.compile_dir(os.path.dirname(mcpsync.__file__), quiet=2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=11, help="fresh processes per row")
    parser.add_argument("--json", help="also write the medians here")
    parser.add_argument(
        "--against", metavar="TREE", help="also the mcpsync row with this checkout's package"
    )
    args = parser.parse_args(argv)
    _compile_mcpsync()
    against = None
    if args.against:
        against = os.path.abspath(args.against)
        if not os.path.isfile(os.path.join(against, "mcpsync", "__init__.py")):
            parser.error(f"--against: no mcpsync package in {against}")
        import compileall

        compileall.compile_dir(os.path.join(against, "mcpsync"), quiet=2)
    results = measure(args.reps, bench.DEMO_ARGV, against)
    print(render(results, args.reps))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
