"""Helpers for the command-line tests: run ``cep`` as a user would, in a subprocess.

``python -m cep.cli`` from the repository root, so the tests work whether or
not the package is installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
PATTERNS = ROOT / "patterns"
EXAMPLES = ROOT / "examples"


def cep(*args: str, input: bytes | None = None, cwd: Path | str | None = None,
        env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``cep ARGS``; returns the completed process (stdout bytes, stderr bytes)."""
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    e.pop("CEP_DEBUG", None)
    if env:
        e.update(env)
    return subprocess.run(
        [sys.executable, "-m", "cep.cli", *map(str, args)],
        input=input if input is not None else b"",
        capture_output=True,
        cwd=str(cwd or ROOT),
        env=e,
        timeout=120,
    )


def lines(data: bytes) -> list[dict]:
    """JSON lines -> dicts."""
    return [orjson.loads(x) for x in data.splitlines() if x.strip()]


def multiset(objs) -> Counter:
    """A multiset of JSON objects (compared by their canonical encoding)."""
    return Counter(orjson.dumps(o, option=orjson.OPT_SORT_KEYS) for o in objs)


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
