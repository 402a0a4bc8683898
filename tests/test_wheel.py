"""A wheel built from the checkout works alone: installed into a fresh virtual environment, run elsewhere.

Why: the editable install of the checkout hides packaging mistakes (a grammar or pattern file that is not
installed, a top-level package that should be inside ``cep``).  This builds the wheel as ``pip`` would from
a copy of the checkout, checks that it holds only the ``cep`` namespace with the grammar, the Maven poms and
the shipped patterns inside, installs it (and its dependencies, from the package index) into a new virtual
environment that sees neither the checkout nor the system's or the editable install's packages, and from a
directory outside the checkout runs ``cep patterns``, ``cep check`` and ``cep run`` on the card testing
example, comparing the output with ``examples/card_testing/expected.jsonl``.

It needs the network for the dependencies (CI has it) and never skips: no index means a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest
from cephelp import EXAMPLES, PATTERNS, ROOT, lines, multiset

# what a copy of the checkout needs to build (everything but caches, venvs and build output)
IGNORE = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache",
                                ".hypothesis", ".ruff_cache", "data", "results", "target")


def _run(cmd: list, cwd: Path, env: dict, timeout: float = 600) -> subprocess.CompletedProcess:
    r = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, timeout=timeout)
    assert r.returncode == 0, f"{cmd} failed ({r.returncode}):\n{r.stdout.decode()}\n{r.stderr.decode()}"
    return r


def _isolated_env(extra_path: Path | None = None) -> dict:
    """The environment of a user's shell: no PYTHONPATH, no user site, no CEP_ variables."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CEP_DEBUG") and not k.startswith("PIP_")}
    env["PYTHONNOUSERSITE"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    if extra_path is not None:
        env["PATH"] = str(extra_path) + os.pathsep + env.get("PATH", "")
    return env


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel ``pip wheel`` builds from a copy of the checkout (in its own isolated build environment)."""
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"
    shutil.copytree(ROOT, src, ignore=IGNORE)
    out = base / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", out, src], cwd=base,
         env=_isolated_env())
    (whl,) = out.glob("cep-*.whl")
    return whl


def test_wheel_holds_only_the_cep_namespace_with_its_data(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    dist_info = {n.split("/")[0] for n in names if n.split("/")[0].endswith(".dist-info")}
    assert len(dist_info) == 1
    outside = [n for n in names if not n.startswith("cep/") and n.split("/")[0] not in dist_info]
    assert outside == [], f"the wheel installs files outside cep/: {outside}"
    assert "cep/grammar/pattern.lark" in names
    assert "cep/lang/grammar_tables.py" in names  # (the parser's tables: no Lark at start-up)
    assert "cep/connectors/jars/pom.xml" in names
    assert any(n.startswith("cep/connectors/jars/") and n.endswith("/pom.xml") and n.count("/") == 4
               for n in names), "the connectors' Maven poms are missing"
    shipped = {p.name for p in PATTERNS.glob("*.pattern")}
    assert len(shipped) >= 8
    assert {n[len("cep/patterns/"):] for n in names if n.startswith("cep/patterns/") and n.endswith(".pattern")} \
        == shipped
    for pkg in ("lang", "plan", "runtime", "io", "commands", "connectors", "patterns", "grammar"):
        assert f"cep/{pkg}/__init__.py" in names, pkg
    assert not any(n.startswith(("cep/tests/", "cep/bench/", "cep/examples/")) for n in names)


def test_installed_wheel_runs_outside_the_checkout(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, system_site_packages=False, clear=True).create(env_dir)
    bindir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    python = bindir / "python"
    env = _isolated_env(bindir)
    work = tmp_path / "user"  # a user's directory: no checkout around it
    work.mkdir()
    _run([python, "-m", "pip", "install", "-q", wheel], cwd=work, env=env)

    # the installed package is the wheel's, not the checkout's or the editable install's
    where = _run([python, "-c", "import cep, cep.patterns, cep.grammar; print(cep.__file__)"], cwd=work, env=env)
    cep_file = Path(where.stdout.decode().strip()).resolve()
    assert env_dir.resolve() in cep_file.parents, cep_file
    assert ROOT.resolve() not in cep_file.parents
    cep_cmd = bindir / "cep"

    listing = _run([cep_cmd, "patterns"], cwd=work, env=env).stdout.decode()
    assert "card_testing" in listing and "Card testing fraud." in listing
    text = _run([cep_cmd, "patterns", "card_testing"], cwd=work, env=env).stdout.decode()
    assert text == (PATTERNS / "card_testing.pattern").read_text()

    # check: a shipped pattern by name, and a user's own copy by path
    (work / "mine.pattern").write_text(text)
    for arg in ("card_testing", "mine.pattern"):
        r = _run([cep_cmd, "check", arg], cwd=work, env=env)
        assert b"pattern card_testing" in r.stdout and b"ok: 1 pattern(s) in 1 file(s)" in r.stdout, r.stdout

    # run the example: input and expected output copied next to the user, not read from the checkout
    example = EXAMPLES / "card_testing"
    shutil.copy(example / "input.jsonl", work / "input.jsonl")
    expected = lines((example / "expected.jsonl").read_bytes())
    assert expected
    for arg in ("card_testing", "mine.pattern"):
        r = _run([cep_cmd, "run", arg, "-i", "input.jsonl", "--quiet"], cwd=work, env=env)
        assert multiset(lines(r.stdout)) == multiset(expected)
    # a pattern error still has its location, from the installed grammar
    (work / "bad.pattern").write_text("PATTERN p SEQ(A a) WITHIN 5 parsecs\n")
    bad = subprocess.run([str(cep_cmd), "check", "bad.pattern"], cwd=work, env=env, capture_output=True,
                         timeout=120)
    assert bad.returncode == 2 and b"bad.pattern:1:29: unknown duration unit 'parsecs'" in bad.stderr
    # a syntax error is located by Lark, loaded only then, from the installed grammar
    (work / "syntax.pattern").write_text("PATTERN p SEQ(A a,) WITHIN 5 s\n")
    bad = subprocess.run([str(cep_cmd), "check", "syntax.pattern"], cwd=work, env=env, capture_output=True,
                         timeout=120)
    assert bad.returncode == 2, bad.stderr
    assert b"syntax.pattern:1:19: expected a name, AND, NOT or SEQ, found ')'" in bad.stderr, bad.stderr
