"""`cep run` keeps its compiled generated code across runs (issue 15: start-up decides short streams).

A run of the card-testing pattern compiled some 60 generated sources, more than half of its
start-up; ``cep.codegen.use_code_cache`` keeps each one's code object in a private per-user
directory (``cep.cachedir``) under a hash of its source.  These tests hold a second run to the
first's output without compiling, a damaged cache to compiling again (same output), and the
cache to a directory nobody else can write.
"""

from __future__ import annotations

import os
import subprocess
import sys

from cephelp import PATTERNS, ROOT

from cep import codegen
from cep.cachedir import private_dir

# counts the generated sources the run compiles (cep.codegen compiles them as "<cep>")
_PROBE = """
import builtins, sys
real = builtins.compile
n = [0]
def counting(source, filename, *a, **k):
    if filename == "<cep>":
        n[0] += 1
    return real(source, filename, *a, **k)
builtins.compile = counting
sys.argv = ["cep", "run", sys.argv[1], "-i", sys.argv[2], "-o", sys.argv[3], "-q"]
from cep.cli import main
try:
    main()
except SystemExit as e:
    assert not e.code, e.code
    print(n[0])
"""


def _run(tmp_path, cache_home, out_name: str, **env_more) -> tuple[int, str]:
    data = tmp_path / "in.jsonl"
    if not data.exists():
        data.write_text("".join(f'{{"type":"Txn","ts":{t},"card":"c{t % 3}","amount":{a}}}\n'
                                for t, a in enumerate((10, 20, 500, 30, 40, 50, 700, 5, 900, 15, 800))))
    out = tmp_path / out_name
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               XDG_CACHE_HOME=str(cache_home), **env_more)
    env.pop("CEP_CODE_CACHE", None) if "CEP_CODE_CACHE" not in env_more else None
    r = subprocess.run([sys.executable, "-c", _PROBE, str(PATTERNS / "card_testing.pattern"), str(data), str(out)],
                       capture_output=True, text=True, cwd=str(ROOT), env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    return int(r.stdout.split()[-1]), out.read_text()


def _entries(cache_home) -> list:
    base = cache_home / "cep"
    return [p for d in base.glob("code-*") for p in d.iterdir()] if base.exists() else []


def test_a_second_run_loads_the_code_the_first_compiled(tmp_path):
    home = tmp_path / "cache"
    compiled, first = _run(tmp_path, home, "a.jsonl")
    assert compiled > 10 and first.count("\n") > 0 and len(_entries(home)) >= compiled
    again, second = _run(tmp_path, home, "b.jsonl")
    assert again == 0  # nothing compiled
    assert second == first


def test_damaged_entries_are_compiled_again_with_the_same_output(tmp_path):
    home = tmp_path / "cache"
    compiled, first = _run(tmp_path, home, "a.jsonl")
    for p in _entries(home):
        p.write_bytes(b"\x00not marshal")
    again, second = _run(tmp_path, home, "b.jsonl")
    assert again == compiled and second == first
    assert _run(tmp_path, home, "c.jsonl") == (0, first)  # the entries were written again


def test_no_cache_when_switched_off_or_when_others_could_write_to_it(tmp_path, monkeypatch):
    home = tmp_path / "cache"
    compiled, first = _run(tmp_path, home, "a.jsonl", CEP_CODE_CACHE="0")
    assert compiled > 10 and _entries(home) == []
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    monkeypatch.delenv("CEP_CODE_CACHE", raising=False)
    assert codegen.code_cache_dir() == private_dir(f"code-{sys.implementation.cache_tag}") is not None
    os.chmod(home / "cep", 0o777)
    assert private_dir() is None and codegen.code_cache_dir() is None
    os.chmod(home / "cep", 0o700)
    monkeypatch.setenv("CEP_CODE_CACHE", "0")
    assert codegen.code_cache_dir() is None


def test_use_code_cache_returns_the_directory_to_restore(tmp_path):
    was = codegen.use_code_cache(str(tmp_path))
    try:
        assert codegen.use_code_cache(None) == str(tmp_path)
    finally:
        codegen.use_code_cache(was)


def test_main_in_a_process_of_its_caller_leaves_the_cache_as_it_was(tmp_path, monkeypatch):
    # (tests call cep.cli.main in their own process: a cache left on made every later compile go to disk)
    from cep.cli import main

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("CEP_CODE_CACHE", raising=False)
    data = tmp_path / "in.jsonl"
    data.write_text('{"type":"Txn","ts":1,"card":"c","amount":10}\n')
    was = codegen.use_code_cache(None)
    try:
        try:
            main(["run", str(PATTERNS / "card_testing.pattern"), "-i", str(data), "-o", str(tmp_path / "o"), "-q"])
        except SystemExit as e:
            assert not e.code
        assert codegen.use_code_cache(None) is None
    finally:
        codegen.use_code_cache(was)
