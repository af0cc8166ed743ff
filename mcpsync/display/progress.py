"""Progress callbacks that draw: :class:`TextProgress` (a stream) and :class:`ProgressBar`
(an IPython display handle, imported lazily; text without IPython), and :func:`progress_bar`.
"""

from __future__ import annotations

import sys
import threading
from typing import IO, Any

from .render import Rendered, _e
from .rows import _get

__all__ = ["TextProgress", "ProgressBar", "progress_bar"]

# --------------------------------------------------------------------------- progress


def _fraction(progress: Any) -> tuple[float, float | None, str]:
    value = float(_get(progress, "progress", default=0) or 0)
    total = _get(progress, "total")
    message = _get(progress, "message", default="") or ""
    return value, (float(total) if total else None), str(message)


class TextProgress:
    """A progress reporter for terminals: redraws one line on a TTY, else prints one line per report.

    Use it as ``on_progress=``; call :meth:`finish` when the call returns.
    """

    def __init__(self, label: str = "", stream: IO[str] | None = None, width: int = 24) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._lock = threading.Lock()
        self._drawn = 0
        self.reports = 0

    def line(self, progress: Any) -> str:
        value, total, message = _fraction(progress)
        prefix = f"{self.label} " if self.label else ""
        if total:
            frac = max(0.0, min(1.0, value / total))
            filled = int(round(frac * self.width))
            bar = "#" * filled + "-" * (self.width - filled)
            text = f"{prefix}[{bar}] {value:g}/{total:g}"
        else:
            text = f"{prefix}{value:g}"
        return f"{text} {message}".rstrip()

    def __call__(self, progress: Any) -> None:
        text = self.line(progress)
        with self._lock:
            self.reports += 1
            if self.tty:
                pad = max(0, self._drawn - len(text))
                self.stream.write("\r" + text + " " * pad)
                self._drawn = len(text)
            else:
                self.stream.write(text + "\n")
            self.stream.flush()

    def finish(self) -> None:
        with self._lock:
            if self.tty and self._drawn:
                self.stream.write("\n")
                self.stream.flush()
                self._drawn = 0


class ProgressBar:
    """A notebook progress bar (an HTML ``<progress>`` updated in place through an IPython
    display handle); falls back to :class:`TextProgress` when IPython is not importable or
    no notebook frontend is active.
    """

    def __init__(self, label: str = "") -> None:
        self.label = label
        self.reports = 0
        self._handle: Any = None
        self._text: TextProgress | None = None
        self._lock = threading.Lock()
        try:
            from IPython import get_ipython  # optional dependency: imported lazily
            from IPython.display import display
        except ImportError:
            self._text = TextProgress(label)
            return
        shell = get_ipython()
        if shell is None or "Terminal" in type(shell).__name__:
            self._text = TextProgress(label)
            return
        self._handle = display(self._render(None), display_id=True)

    def html(self, progress: Any) -> str:
        label = f"<b>{_e(self.label)}</b> " if self.label else ""
        if progress is None:
            return f"<div class='mcpsync-progress'>{label}<progress></progress> waiting</div>"
        value, total, message = _fraction(progress)
        if total:
            bar = f"<progress value='{value:g}' max='{total:g}'></progress> {value:g}/{total:g}"
        else:
            bar = f"<progress></progress> {value:g}"
        return f"<div class='mcpsync-progress'>{label}{bar} {_e(message)}</div>"

    def __call__(self, progress: Any) -> None:
        with self._lock:
            self.reports += 1
            if self._text is not None:
                self._text(progress)
            elif self._handle is not None:
                self._handle.update(self._render(progress))

    def _render(self, progress: Any) -> Rendered:
        """HTML for notebooks, with a text form for text-only frontends and nbconvert."""
        text = (
            TextProgress(self.label).line(progress)
            if progress is not None
            else f"{self.label} waiting"
        )
        return Rendered(self.html(progress), text.strip())

    def finish(self) -> None:
        if self._text is not None:
            self._text.finish()


def progress_bar(label: str = "") -> ProgressBar:
    """A progress callback for ``on_progress=``: a bar in notebooks, a text line elsewhere."""
    return ProgressBar(label)
