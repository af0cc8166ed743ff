"""The benchmark figure: mcpsync and the official SDK client against the bare loop, as an SVG.

Owns ``write_svg(report, path)``: from the report ``bench.py`` writes (``--json``), one bar
per client and metric, each the ratio to the bare write-line/read-line loop of the same run
(1.0x: as fast as the loop; for rates and MB/s higher is better). Plain SVG text, no
plotting library. ``bench.py --plot FILE`` calls it after a run; from a saved report:

    python benchmarks/plot.py report.json docs/performance.svg
"""

from __future__ import annotations

import json
import sys
from html import escape
from typing import Any

METRICS = (  # key in a summary, label; all "higher is better"
    ("seq_rate", "sequential calls/s"),
    ("threads_rate", "8 threads, one session"),
    ("big1_mbps", "1 MB result, MB/s"),
    ("big10_mbps", "10 MB result, MB/s"),
)
CLIENTS = (("mcpsync", "mcpsync", "#3f51b5"), ("sdk", "official SDK client", "#ff9800"))
BAR, ROW_GAP, LEFT, WIDTH, TOP = 14, 10, 250, 820, 56


def ratios(report: dict[str, Any]) -> list[tuple[str, str, dict[str, float | None]]]:
    """(transport, metric label, {client: ratio to bare or None}) for each row of the figure."""
    rows = []
    for transport in ("stdio", "http"):
        summary = report.get(transport, {}).get("summary")
        if not summary or "error" in summary.get("bare", {"error": 1}):
            continue
        bare = summary["bare"]
        for key, label in METRICS:
            if not bare.get(key):
                continue
            values: dict[str, float | None] = {}
            for client, _, _ in CLIENTS:
                value = summary.get(client, {}).get(key)
                values[client] = None if value is None else value / bare[key]
            rows.append((transport, label, values))
    return rows


def render(report: dict[str, Any]) -> str:
    """The SVG text of the figure for ``report``."""
    rows = ratios(report)
    top = max([1.5, *(v for _, _, vs in rows for v in vs.values() if v is not None)]) * 1.1
    plot_w = WIDTH - LEFT - 60
    row_h = len(CLIENTS) * BAR + ROW_GAP
    height = TOP + len(rows) * row_h + 50

    def x(value: float) -> float:
        return LEFT + plot_w * value / top

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" '
        f'height="{height}" font-family="sans-serif" font-size="12">',
        "<title>mcpsync and the official SDK client, each as a ratio to a bare loop</title>",
        f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
        '<text x="10" y="20" font-size="14" font-weight="bold">Rate against a bare '
        "write-line/read-line loop (1.0x = as fast; higher is better)</text>",
        f'<text x="10" y="38" fill="#555">{escape(str(report.get("uptime_before", "")))[:110]}</text>',
    ]
    for n, (transport, label, values) in enumerate(rows):
        y = TOP + n * row_h
        out.append(
            f'<text x="{LEFT - 8}" y="{y + BAR + 4}" text-anchor="end">{transport}: {escape(label)}</text>'
        )
        for i, (client, _, color) in enumerate(CLIENTS):
            value = values.get(client)
            by = y + i * BAR
            if value is None:
                out.append(f'<text x="{LEFT + 4}" y="{by + BAR - 3}" fill="#999">not run</text>')
                continue
            out.append(
                f'<rect x="{LEFT}" y="{by}" width="{x(value) - LEFT:.1f}" height="{BAR - 2}" fill="{color}"/>'
            )
            out.append(f'<text x="{x(value) + 4:.1f}" y="{by + BAR - 3}">{value:.2f}x</text>')
    axis_y = TOP + len(rows) * row_h
    out.append(
        f'<line x1="{x(1):.1f}" y1="{TOP - 6}" x2="{x(1):.1f}" y2="{axis_y}" stroke="#000" stroke-dasharray="4 3"/>'
    )
    out.append(
        f'<text x="{x(1):.1f}" y="{axis_y + 14}" text-anchor="middle">1.0x (bare loop)</text>'
    )
    for i, (_, name, color) in enumerate(CLIENTS):
        lx = LEFT + i * 200
        out.append(f'<rect x="{lx}" y="{axis_y + 26}" width="12" height="12" fill="{color}"/>')
        out.append(f'<text x="{lx + 18}" y="{axis_y + 36}">{escape(name)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write_svg(report: dict[str, Any], path: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(render(report))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python benchmarks/plot.py REPORT.json OUT.svg")
    with open(sys.argv[1], encoding="utf-8") as fh:
        write_svg(json.load(fh), sys.argv[2])
