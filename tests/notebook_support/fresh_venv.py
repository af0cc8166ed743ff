"""A fresh venv with ``mcpsync[notebooks]`` installed from a wheel of this checkout.

Owns: what ``test_every_notebook_runs_in_a_fresh_venv_with_the_extra`` (and
``scripts/test-notebooks``) set up, the way a user would: the wheel built with
``python -m build`` (sdist first, the wheel from it, as pip does) from a copy of the
checkout's top-level files and ``mcpsync/``; a new venv of the base interpreter (not the
test venv) in a temporary folder outside the checkout; ``pip install "<wheel>[notebooks]"``
(not editable, no test extra; pip may use its cache and the configured indexes); and the
environment a kernel of that venv runs in: that venv's ``bin`` first, nothing of the
checkout, the test venv or the npm peers on ``PATH`` or ``PYTHONPATH``. Each step's time is
kept in ``FreshVenv.timings``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent.parent

#: environment variables that would let the checkout or the test venv leak into the kernel
_DROPPED = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "VIRTUAL_ENV")


@dataclass
class FreshVenv:
    root: Path
    wheel: Path
    python: Path
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def bin(self) -> Path:
        return self.python.parent

    def env(self) -> dict[str, str]:
        """The environment of a kernel in this venv (see the module docstring)."""
        env = {k: v for k, v in os.environ.items() if k not in _DROPPED}
        keep = [
            p
            for p in env.get("PATH", "").split(os.pathsep)
            if p and not p.startswith(str(REPO)) and not p.startswith(sys.prefix)
        ]
        env["PATH"] = os.pathsep.join([str(self.bin), *keep])
        env["PYTHONNOUSERSITE"] = "1"
        return env

    def processes(self) -> dict[int, str]:
        """pid -> command line of every live (non-zombie) process that runs from this venv
        (a kernel, or a server started with the kernel's ``sys.executable``)."""
        needle = str(self.root)
        found = {}
        for proc in psutil.process_iter(["pid", "cmdline", "status"]):
            try:
                cmdline = " ".join(proc.info["cmdline"] or [])
                if needle in cmdline and proc.info["status"] != psutil.STATUS_ZOMBIE:
                    found[proc.info["pid"]] = cmdline[:300]
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        return found


def _run(
    argv: list[str],
    what: str,
    timeout: float,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
    if proc.returncode != 0:
        raise AssertionError(
            f"{what} failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return str(proc.stdout)


def _timed(timings: dict[str, float], step: str, started: float) -> float:
    now = time.perf_counter()
    timings[step] = now - started
    return now


def make(root: Path) -> FreshVenv:
    """Build the wheel and install it with the ``notebooks`` extra into ``root / "venv"``."""
    if root.resolve().is_relative_to(REPO):
        raise AssertionError(f"{root} is inside the checkout")
    timings: dict[str, float] = {}
    t = time.perf_counter()

    src = root / "src"
    src.mkdir(parents=True)
    for item in REPO.iterdir():
        if item.is_file():
            shutil.copy2(item, src / item.name)
    shutil.copytree(REPO / "mcpsync", src / "mcpsync", ignore=shutil.ignore_patterns("__pycache__"))
    _run([sys.executable, "-m", "build", "--outdir", str(root / "dist"), str(src)], "build", 300)
    (wheel,) = (root / "dist").glob("*.whl")
    t = _timed(timings, "build the sdist and the wheel", t)

    base = getattr(sys, "_base_executable", sys.executable)
    _run([base, "-m", "venv", str(root / "venv")], "python -m venv", 120)
    python = root / "venv" / "bin" / "python"
    venv = FreshVenv(root, wheel, python, timings)
    _run(
        [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--quiet"]
        + [f"{wheel}[notebooks]"],
        "pip install <wheel>[notebooks]",
        600,
        env=venv.env(),
        cwd=root,
    )
    _timed(timings, "make the venv and pip install <wheel>[notebooks]", t)
    return venv
