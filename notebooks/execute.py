"""Re-execute the notebooks in this folder in place, each from a clean kernel (nbclient).

Owns: running ``notebooks/*.ipynb`` the way CI does: outputs cleared first, a fresh kernel
that runs *this* Python (``sys.executable``, i.e. the venv with mcpsync installed, whatever
kernelspecs the machine has) or the one given with ``--python`` (e.g. a fresh venv made with
``pip install "mcpsync[notebooks]"``), the notebook folder as working directory, a per-cell
timeout, and no error allowed. ``tests/notebooks/test_notebooks.py`` imports :func:`execute` from here.

Usage (from anywhere)::

    .venv/bin/python notebooks/execute.py                 # all notebooks, rewritten in place
    .venv/bin/python notebooks/execute.py 01-quickstart-stdio.ipynb --check   # run, do not write
    .venv/bin/python notebooks/execute.py --check --python /tmp/nbvenv/bin/python  # another venv
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = [
    "NOTEBOOKS_DIR",
    "KERNEL_NAME",
    "notebooks",
    "kernel_manager",
    "execute",
    "run_notebook",
    "problems",
]

NOTEBOOKS_DIR = Path(__file__).resolve().parent
KERNEL_NAME = "mcpsync-venv"


def notebooks() -> list[Path]:
    """The notebooks of this folder, in name order."""
    return sorted(NOTEBOOKS_DIR.glob("[0-9][0-9]-*.ipynb"))


def kernel_manager(spec_dir: Path, *, asynchronous: bool = True, python: str | None = None) -> Any:
    """A kernel manager whose kernelspec (written into ``spec_dir``) runs ``python``
    (default ``sys.executable``), which must have ``ipykernel``."""
    from jupyter_client import AsyncKernelManager, KernelManager
    from jupyter_client.kernelspec import KernelSpecManager

    python = python or sys.executable
    kdir = spec_dir / KERNEL_NAME
    kdir.mkdir(parents=True, exist_ok=True)
    spec = {
        "argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": f"Python ({python})",
        "language": "python",
    }
    (kdir / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")
    ksm = KernelSpecManager(kernel_dirs=[str(spec_dir)], ensure_native_kernel=False)
    cls = AsyncKernelManager if asynchronous else KernelManager
    return cls(kernel_name=KERNEL_NAME, kernel_spec_manager=ksm)


def clear_outputs(nb: Any) -> None:
    """Remove every output and execution count (the clean state a run starts from)."""
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
            cell.metadata.pop("execution", None)


def execute(
    path: Path,
    *,
    timeout: float = 60.0,
    startup_timeout: float = 60.0,
    after_cell: Callable[[int | None, int], None] | None = None,
    env: dict[str, str] | None = None,
    python: str | None = None,
) -> Any:
    """Execute the notebook at ``path`` from a clean kernel; return the executed notebook.

    Raises ``nbclient.exceptions.CellExecutionError`` on the first cell that raises and
    ``CellTimeoutError`` when a cell runs longer than ``timeout`` seconds. The kernel is
    shut down in every case. ``after_cell(kernel_pid, cell_index)`` runs after each code
    cell (tests use it to see which processes the notebook left running); ``env`` is the
    kernel's environment (default: this process's); ``python`` the kernel's interpreter
    (default: this one).
    """
    import nbformat

    nb = nbformat.read(path, as_version=4)
    run_notebook(
        nb,
        path.parent,
        timeout=timeout,
        startup_timeout=startup_timeout,
        after_cell=after_cell,
        env=env,
        python=python,
    )
    return nb


def run_notebook(
    nb: Any,
    cwd: Path,
    *,
    timeout: float = 60.0,
    startup_timeout: float = 60.0,
    after_cell: Callable[[int | None, int], None] | None = None,
    env: dict[str, str] | None = None,
    python: str | None = None,
) -> None:
    """:func:`execute` for a notebook object, run in place in ``cwd`` (its outputs are
    there even when a cell raised)."""
    from nbclient import NotebookClient

    clear_outputs(nb)
    with tempfile.TemporaryDirectory(prefix="mcpsync-kernelspec-") as spec_dir:
        km = kernel_manager(Path(spec_dir), python=python)

        def hook(cell: Any, cell_index: int, execute_reply: Any) -> None:
            if after_cell is not None:
                after_cell(getattr(km.provisioner, "pid", None), cell_index)

        client = NotebookClient(
            nb,
            km=km,
            timeout=int(timeout),
            startup_timeout=int(startup_timeout),
            allow_errors=False,
            record_timing=False,
            coalesce_streams=True,
            shutdown_kernel="graceful",
            on_cell_executed=hook,
            resources={"metadata": {"path": str(cwd)}},
        )
        kwargs: dict[str, Any] = {} if env is None else {"env": env}
        # we made the kernel manager: shut the kernel down too (also after a failed cell)
        client.execute(cleanup_kc=True, **kwargs)


def problems(nb: Any) -> list[str]:
    """Every error output and every stderr stream of an executed notebook, one line each."""
    found = []
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                found.append(f"cell {i}: {out.get('ename')}: {out.get('evalue')}")
            elif out.get("output_type") == "stream" and out.get("name") == "stderr":
                found.append(f"cell {i}: stderr: {out.get('text', '').strip()[:500]}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", help="notebook files (default: all in this folder)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per cell")
    parser.add_argument("--check", action="store_true", help="run only; do not rewrite the files")
    parser.add_argument(
        "--python", help="the kernel's interpreter (default: this one); it needs ipykernel"
    )
    args = parser.parse_args(argv)

    import nbformat

    paths = [Path(p).resolve() for p in args.notebooks] or notebooks()
    failed = 0
    for path in paths:
        started = time.perf_counter()
        try:
            nb = execute(path, timeout=args.timeout, python=args.python)
        except Exception as exc:  # noqa: BLE001 - report it and go on with the next notebook
            failed += 1
            print(f"FAIL {path.name}: {type(exc).__name__}: {str(exc)[-2000:]}", file=sys.stderr)
            continue
        seconds = time.perf_counter() - started
        issues = problems(nb)
        if issues:
            failed += 1
            print(f"FAIL {path.name} ({seconds:.1f} s):", *issues, sep="\n  ", file=sys.stderr)
            continue
        if not args.check:
            nbformat.write(nb, path)
        print(f"ok   {path.name} ({seconds:.1f} s){'' if args.check else ', written'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
