"""What `cep run` imports to run patterns over a file (issue 15: start-up decides short streams).

A 5,000-event stream takes well under a second, so every module a file run imports without using
it is a measurable part of the run.  Connectors (Kafka, Spark), `cep explain`, checkpoints, CSV and
the idle-advance reader thread are imported where they are used; this checks that a plain file run
does not load them, and that the run still works when they are needed (other tests run them).
"""

from __future__ import annotations

import os
import subprocess
import sys

from cephelp import PATTERNS, ROOT

# what a JSON-lines file run with no checkpoint, no CSV and no idle advance never needs (click: a plain
# `cep run` command line is read by cep.cli itself)
NOT_IMPORTED = ("kafka", "pyspark", "cep.connectors", "cep.io.kafka", "cep.commands.explain",
                "cep.io.checkpoint", "csv", "queue", "tqdm", "hypothesis", "cep.commands.check", "lark",
                "click", "cep.cli_click", "difflib", "dataclasses", "inspect",  # (but what orjson imports itself)
                # HTTP, TLS and the scientific stack: nothing of a file run speaks to a network or a frame
                # (``certifi`` here may come with the interpreter's own start-up: a ``.pth`` file of the
                # environment imports it, then it is what ``import orjson`` loads too and not counted)
                "requests", "urllib3", "certifi", "ssl", "http", "email", "socket", "numpy", "pandas", "pyarrow")

_PROBE = """
import sys
sys.argv = ["cep", "run", sys.argv[1], "-i", sys.argv[2], "-o", sys.argv[3], "-q"]
from cep.cli import main
try:
    main()
except SystemExit as e:
    assert not e.code, e.code
print(" ".join(sorted(sys.modules)))
"""


def _modules_of_a_file_run(tmp_path) -> set[str]:
    data = tmp_path / "in.jsonl"
    data.write_text("".join(f'{{"type":"Txn","ts":{t},"card":"c","amount":{a}}}\n'
                            for t, a in enumerate((10, 20, 500, 30))))
    out = tmp_path / "out.jsonl"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", _PROBE, str(PATTERNS / "card_testing.pattern"), str(data), str(out)],
                       capture_output=True, text=True, cwd=str(ROOT), env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert len(out.read_text().splitlines()) == 1  # the run did its work
    return set(r.stdout.split())


def _modules_of(code: str) -> set[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", code + "\nimport sys; print(' '.join(sorted(sys.modules)))"],
                       capture_output=True, text=True, cwd=str(ROOT), env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    return set(r.stdout.split())


def _leaked(loaded: set[str]) -> list[str]:
    theirs = _imported_by_orjson()
    return [m for m in NOT_IMPORTED if m not in theirs and (m in loaded or any(x.startswith(m + ".") for x in loaded))]


def _imported_by_orjson() -> set[str]:
    """What importing orjson (the JSON codec cep needs) loads by itself: orjson 3.13 imports
    ``dataclasses`` (and with it ``inspect``) to serialize dataclass objects, 3.8 does not."""
    r = subprocess.run([sys.executable, "-c", "import sys, orjson; print(' '.join(sys.modules))"],
                       capture_output=True, text=True, check=True, timeout=60)
    return set(r.stdout.split())


def test_a_file_run_imports_no_connector_explain_checkpoint_or_csv_module(tmp_path):
    loaded = _modules_of_a_file_run(tmp_path)
    assert "cep.runtime.engine" in loaded  # the probe sees the run's modules
    assert _leaked(loaded) == []


def test_importing_the_run_command_imports_no_connector_or_network_module():
    loaded = _modules_of("import cep.commands.run")
    assert "cep.io.readers" in loaded
    assert _leaked(loaded) == []


def test_the_probe_sees_an_eager_import():
    # what the two tests above would say if the run's modules imported one of these at start-up
    assert _leaked(_modules_of("import cep.commands.run, csv, http")) == ["csv", "http"]


def test_a_lazy_pattern_is_the_compiled_pattern_at_first_use():
    import re

    from cep.lazyre import lazy

    p = lazy(r"(?P<w>\w+)-(\d+)", re.IGNORECASE)
    assert p._compiled is None  # nothing compiled until used
    assert p.fullmatch("Ab-12").group("w") == "Ab"
    assert p.compiled() is p._compiled == re.compile(r"(?P<w>\w+)-(\d+)", re.IGNORECASE)
    assert p.sub("x", "a-1 b-2") == "x x" and p.pattern == r"(?P<w>\w+)-(\d+)" and p.groups == 2
