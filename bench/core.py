"""CORE side by side: its own CPython 3.13 environment with ``pycer``, and the measured CORE run.

Why its own environment: ``pycer`` (CORE's Python bindings) ships a wheel for CPython 3.13 only, while
cep runs on the project's interpreter. ``core_python()`` finds a 3.13 interpreter (``CEP_BENCH_PY313``,
``python3.13`` on PATH, or pyenv's 3.13.x), makes ``bench/.venv-core`` (git-ignored) with it and
pip-installs ``pycer`` and ``orjson`` there once; when any step fails it returns the reason instead of
a path, and the bench says so and runs without CORE (no figure is ever made up).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from bench import procs

VENV = procs.BENCH_DIR / ".venv-core"
RUNNER = procs.BENCH_DIR / "core_runner.py"


class CoreUnavailable(RuntimeError):
    """No CPython 3.13 or no pycer: the message says which."""


def _find_py313() -> str | None:
    """The first CPython 3.13 that runs: ``CEP_BENCH_PY313``, pyenv's 3.13.x, ``python3.13`` on PATH
    (a pyenv shim on PATH may exist and still refuse to run when 3.13 is not selected)."""
    pyenv = Path.home() / ".pyenv" / "versions"
    candidates = [os.environ.get("CEP_BENCH_PY313"),
                  *(str(p) for p in sorted(pyenv.glob("3.13*/bin/python3"), reverse=True) if pyenv.is_dir()),
                  shutil.which("python3.13")]
    for c in candidates:
        if c and subprocess.run([c, "-c", "import sys; assert sys.version_info[:2] == (3, 13)"],
                                capture_output=True).returncode == 0:
            return c
    return None


def core_python() -> str:
    """The 3.13 venv's interpreter with pycer importable; made on first use. Raises CoreUnavailable."""
    py = VENV / "bin" / "python"
    if py.exists() and subprocess.run([str(py), "-c", "import pycer, orjson"], capture_output=True).returncode == 0:
        return str(py)
    base = _find_py313()
    if base is None:
        raise CoreUnavailable("no CPython 3.13 on this machine (pycer ships a cp313 wheel only); "
                              "set CEP_BENCH_PY313 to a 3.13 interpreter")
    steps = [[base, "-m", "venv", str(VENV)],
             [str(py), "-m", "pip", "install", "-q", "pycer", "orjson"]]
    for cmd in steps:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if p.returncode != 0:
            raise CoreUnavailable(f"{' '.join(cmd)} failed: {(p.stderr or p.stdout)[-600:]}")
    p = subprocess.run([str(py), "-c", "import pycer"], capture_output=True, text=True)
    if p.returncode != 0:
        raise CoreUnavailable(f"pycer installed but does not import: {p.stderr[-600:]}")
    return str(py)


def run_core(python: str, decl: str, query: str, fields: str, input_path: Path, output: str = "/dev/null",
             timeout: float = 900, floor: bool = True) -> dict:
    """CORE's runner as a measured child (wall time and its own peak RSS), in a scratch directory
    (pycer writes ``logs/logfile.log`` into its working directory)."""
    with tempfile.TemporaryDirectory(prefix="cep-bench-core-") as scratch:
        cmd = [python, str(RUNNER), "--decl", decl, "--query", query, "--fields", fields,
               "-i", str(Path(input_path).resolve()), "-o", output, *([] if floor else ["--no-floor"])]
        r = procs.run_measured(cmd, timeout, cwd=scratch)
    if r["rc"] != 0:
        raise procs.RunFailed(f"core_runner exited {r['rc']}: {r['stderr'][-2000:]}")
    res = procs.json_tail(r["stdout"])
    res["wall_s"] = r["wall_s"]
    res["peak_rss_mb"] = r["sampled_hwm_mb"] or r["maxrss_mb"]
    res["cpu_s"] = r["cpu_s"]
    return res
