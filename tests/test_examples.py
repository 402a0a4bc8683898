"""Every example under examples/ produces its expected.jsonl (compared as multisets).

The command is taken from the example's own run.sh (the line ``exec cep run
...``), so the documented command is the one tested.
"""

from __future__ import annotations

import shlex

import pytest
from cephelp import EXAMPLES, PATTERNS, cep, lines, multiset

EXAMPLE_DIRS = sorted(p for p in EXAMPLES.iterdir() if (p / "run.sh").exists())


def example_args(d) -> list[str]:
    for line in (d / "run.sh").read_text().splitlines():
        if line.startswith("exec cep run "):
            args = shlex.split(line[len("exec cep "):])
            return [a for a in args if a != "$@"]
    raise AssertionError(f"{d}/run.sh has no 'exec cep run' line")


def test_there_are_examples_for_at_least_six_patterns():
    assert len(EXAMPLE_DIRS) >= 6
    used = {a for d in EXAMPLE_DIRS for a in example_args(d) if a.endswith(".pattern")}
    for p in PATTERNS.glob("*.pattern"):
        assert f"patterns/{p.name}" in used, f"{p.name} has no example"


@pytest.mark.parametrize("d", EXAMPLE_DIRS, ids=[d.name for d in EXAMPLE_DIRS])
def test_example_output_matches_expected(d):
    r = cep(*example_args(d), "--quiet")
    assert r.returncode == 0, r.stderr.decode()
    expected = lines((d / "expected.jsonl").read_bytes())
    assert expected, "an example should produce at least one match"
    assert multiset(lines(r.stdout)) == multiset(expected)


@pytest.mark.parametrize("p", sorted(PATTERNS.glob("*.pattern")), ids=lambda p: p.name)
def test_pattern_files_start_with_an_explaining_comment(p):
    first = p.read_text().splitlines()[0]
    assert first.startswith("--") and len(first) > 10


def test_card_testing_is_the_language_reference_example():
    """docs/language.md shows the shipped card_testing pattern, word for word."""
    text = (PATTERNS / "card_testing.pattern").read_text()
    doc = (PATTERNS.parent / "docs" / "language.md").read_text()
    example = doc.split("```pattern\n", 1)[1].split("```", 1)[0]
    body = example[example.index("PATTERN"):]
    assert body in text


def _readme_commands() -> list[str]:
    from cephelp import ROOT

    text = (ROOT / "README.md").read_text()
    return [line for line in text.splitlines() if line.startswith("python3 -m pip install -e ")]


def test_ci_runs_exactly_the_readme_test_command():
    from cephelp import ROOT

    cmds = _readme_commands()
    test_cmd = [c for c in cmds if "pytest" in c]
    assert len(test_cmd) == 1
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.startswith("#")]
    assert ci[0] == "set -euo pipefail"
    assert ci[-1] == test_cmd[0]


def test_readme_example_command_gives_the_expected_output():
    cmds = [c for c in _readme_commands() if " cep run " in c]
    assert len(cmds) == 1
    args = shlex.split(cmds[0].split(" && ", 1)[1])
    assert args[:2] == ["cep", "run"]
    r = cep(*args[1:], "-q")
    assert r.returncode == 0, r.stderr.decode()
    expected = lines((EXAMPLES / "card_testing" / "expected.jsonl").read_bytes())
    assert multiset(lines(r.stdout)) == multiset(expected)


KLEENE_EXAMPLES = ["failed_logins", "card_testing_run", "overheating_run"]


@pytest.mark.parametrize("name", KLEENE_EXAMPLES)
def test_kleene_examples_agree_with_the_reference_evaluator(name):
    """The expected output of the repetition examples (spec 7.3) was produced by the engine;
    the brute-force reference evaluator, written from the spec alone, must give the same."""
    from datetime import datetime

    import reference

    from cep.event import match_id

    d = EXAMPLES / name
    (pattern,) = [a for a in example_args(d) if a.endswith(".pattern")]
    records = lines((d / "input.jsonl").read_bytes())
    for r in records:
        if isinstance(r["ts"], str):
            r["ts"] = int(datetime.fromisoformat(r["ts"].replace("Z", "+00:00")).timestamp())
    ref = reference.evaluate((PATTERNS.parent / pattern).read_text(), records)
    want = multiset({"pattern": p, "op": "+", "id": match_id(p, pos), "match": dict(_thaw(f))}
                    for (p, pos, f), n in ref.matches.items() for _ in range(n))
    assert want == multiset(lines((d / "expected.jsonl").read_bytes()))


def _thaw(frozen):
    """A frozen match (``reference.freeze_match``) back to plain values."""
    def value(v):
        kind, x = v
        if kind == "obj":
            return {k: value(y) for k, y in x}
        if kind == "list":
            return [value(y) for y in x]
        return x

    return [(k, value(v)) for k, v in frozen]
