"""``cep check`` validates without generating code, and says exactly what it said when it did.

Checking compiles every pattern to its query inside ``compiler.without_code()``
(issue 12: code generation was a third of its time).  These tests hold it to
printing the same summaries, diagnostics and exit code as checking with code,
on every shipped pattern and every pattern the error tests use, and fail if
checking ever generates code again.
"""

from __future__ import annotations

import ast as pyast
import io
from pathlib import Path

import pytest

from cep import codegen
from cep.commands.check import run_check
from cep.lang import compiler, expr
from cep.lang.parser import parse_text

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = sorted((ROOT / "patterns").glob("*.pattern"))
HEAD = "PATTERN p\n  SEQ(Txn s1, Txn s2)\n"


def error_test_patterns() -> list[str]:
    """Every string of the parser, checker and check-command tests, as a pattern file.

    A string that is not a whole pattern (most are a clause added to a head) gets
    the checker tests' head, so each is checked as those tests check it.
    """
    texts: set[str] = set()
    for name in ("test_checker_errors.py", "test_check_command.py", "test_parser.py"):
        for node in pyast.walk(pyast.parse((ROOT / "tests" / name).read_text())):
            if isinstance(node, pyast.Constant) and isinstance(node.value, str) and node.value.strip():
                s = node.value
                texts.add(s if "pattern" in s.lower() else HEAD + s)
    return sorted(texts)


def check(paths: list[Path], generate_code: bool) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = run_check([str(p) for p in paths], out, err, generate_code=generate_code)
    return rc, out.getvalue(), err.getvalue()


def test_shipped_patterns_check_the_same_with_and_without_code():
    assert len(SHIPPED) >= 10
    for path in SHIPPED:
        assert check([path], False) == check([path], True), path
    together = check(SHIPPED, False)
    assert together == check(SHIPPED, True)
    assert together[0] == 0 and f"ok: {len(SHIPPED)} pattern(s)" in together[1]


def test_error_test_patterns_check_the_same_with_and_without_code(tmp_path):
    texts = error_test_patterns()
    assert len(texts) > 100
    exits = set()
    for i, text in enumerate(texts):
        path = tmp_path / f"t{i}.pattern"
        path.write_text(text)
        without = check([path], False)
        assert without == check([path], True), text
        exits.add(without[0])
    assert exits == {0, 2}  # good and bad patterns both


def test_check_generates_no_code(monkeypatch):
    define = codegen.define

    def refuse(label=None, *args, **kwargs):
        if isinstance(label, str) and label.startswith("parser:"):  # (the parser's own loop code, not the patterns')
            return define(label, *args, **kwargs)
        raise AssertionError("cep check generated code")

    monkeypatch.setattr(codegen, "define", refuse)
    monkeypatch.setattr(expr, "_build", refuse)
    rc, out, err = check(SHIPPED, False)
    assert rc == 0 and err == ""
    with pytest.raises(AssertionError, match="generated code"):
        check(SHIPPED[:1], True)  # (the refusal is in the path that generates)


def test_a_pattern_compiled_without_code_refuses_to_run():
    text = (ROOT / "patterns" / "card_testing.pattern").read_text()
    (p,) = parse_text(text)
    with compiler.without_code():
        cp = compiler.compile_pattern(p)
    assert cp.atoms[0].filter_text == "s1.amount < 100"
    with pytest.raises(RuntimeError, match="compiled for checking only"):
        cp.atoms[0].filter(None)  # type: ignore[misc]
    ran = compiler.compile_pattern(p)  # outside the block: code again
    assert ran.atoms[0].filter is not None and ran.atoms[0].filter is not cp.atoms[0].filter


def test_and_within_span_predicate_is_not_generated_when_checking(tmp_path, monkeypatch):
    # the one k-ary span predicate of an AND with WITHIN is made by the compiler itself
    path = tmp_path / "and.pattern"
    path.write_text("PATTERN p\n  AND(A a, B b, C c, D d)\n  WITHIN 5\n")
    with_code = check([path], True)
    define = codegen.define
    monkeypatch.setattr(codegen, "define", lambda label, *a, **k: define(label, *a, **k) if label.startswith("parser:")
                        else (_ for _ in ()).throw(AssertionError("generated")))
    assert check([path], False) == with_code
    with compiler.without_code():
        (cp,) = compiler.compile_text(path.read_text())
    span = next(p for p in cp.predicates if p.origin == "span")
    with pytest.raises(RuntimeError, match="compiled for checking only"):
        span.fn(0, 1, 2, 3)


def test_check_imports_neither_the_runtime_nor_code_generation():
    """Start-up counts (issue 12): ``cep check`` loads the language layer only."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from cep.cli import main\n"
        f"sys.argv = ['cep', 'check', {str(SHIPPED[0])!r}]\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert e.code == 0, e.code\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT)
    loaded = set(r.stdout.strip().splitlines()[-1].split())
    assert "cep.lang.parser" in loaded and "cep.lang.compiler" in loaded
    unwanted = {m for m in loaded if m.startswith(("cep.runtime", "cep.plan", "cep.io", "sortedcontainers"))}
    unwanted |= loaded & {"cep.lang.expr", "cep.values", "orjson"}  # (cep.codegen: the parser's loop code)
    assert not unwanted
