"""``cep run``'s own reading of a plain command line gives what click gives (issue 15).

``cep.cli.plain_run`` reads a plain ``cep run`` command line without importing click;
whatever it reads must be exactly the ``RunOptions`` that click's ``run_cmd`` builds, and
whatever click would refuse or read otherwise must be left to click (None).
"""

from __future__ import annotations

import os

import click
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cep.commands.run as run_module
from cep import cli, cli_click
from cep.units import TIME_UNITS

CARD = "patterns/card_testing.pattern"


def _click_reading(monkeypatch, argv: list[str]):
    """The RunOptions click's ``run_cmd`` passes to ``run``, or None if click stops first (usage error, help)."""
    got = []
    monkeypatch.setattr(run_module, "run", lambda opts, err=None: got.append(opts) or 0)
    try:
        cli_click.cli.main(args=list(argv), prog_name="cep", standalone_mode=False)
    except SystemExit:
        pass
    except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
        return None
    return got[0] if got else None


def _agree(monkeypatch, argv: list[str]) -> bool:
    """Check one command line; True if the plain reading took it."""
    mine = cli.plain_run(list(argv))
    if mine is None:
        return False
    theirs = _click_reading(monkeypatch, argv)
    assert theirs is not None, argv  # click refuses what the plain reading took
    assert cli.run_options(mine) == theirs, argv
    return True


CASES = [
    ["run", CARD],
    ["run", CARD, "-i", "examples/card_testing/input.jsonl", "-o", "/dev/null", "-q"],
    ["run", "-q", CARD, "card_testing", "--no-progress", "--input", "-", "--output", "out.jsonl"],
    ["run", CARD, "--format", "csv", "--type-field", "kind", "--time-field", "t", "--time-unit", "ms",
     "--op-field", "o", "--lateness", "5 s", "--late-output", "late.jsonl", "--on-error", "skip",
     "--errors", "e.jsonl", "--checkpoint", "c.ckpt", "--checkpoint-every", "007",
     "--checkpoint-interval", "2.5", "--idle-advance", "3", "--workers", "2", "--test-stop-after", "10",
     "--test-crash-at-stop"],
    ["run", CARD, "--checkpoint-interval", "0", "--checkpoint-interval", "1"],  # twice: left to click
    ["run", CARD, "--input=x"], ["run", CARD, "-qi", "x"], ["run", CARD, "--", "x"], ["run", "-", CARD],
    ["run", CARD, "--help"], ["run", CARD, "-h"], ["run"], ["run", "-q"], ["--version"], ["check", CARD],
    ["run", CARD, "--format", "xml"], ["run", CARD, "--time-unit", "weeks"], ["run", CARD, "--workers", "0"],
    ["run", CARD, "--workers", "-1"], ["run", CARD, "--workers", "1.5"], ["run", CARD, "--checkpoint-every"],
    ["run", CARD, "--checkpoint-interval", "-1"], ["run", CARD, "--checkpoint-interval", "1e3"],
    ["run", CARD, "-i", "--quiet"], ["run", "patterns"], ["run", "patterns/"], ["run", CARD + "/"],
    ["run", "no_such_pattern"], ["run", "no_such.pattern", "-i", ""], ["run", "", CARD],
    ["run", CARD, "--bogus"], ["run", CARD, "-x"], ["run", CARD, "--quiet", "--quiet"],
]


@pytest.mark.parametrize("argv", CASES, ids=[" ".join(c) or "-" for c in CASES])
def test_plain_reading_is_clicks_or_nothing(monkeypatch, argv):
    _agree(monkeypatch, argv)


def test_the_common_command_lines_are_read_without_click(monkeypatch):
    assert all(_agree(monkeypatch, argv) for argv in CASES[:4])
    assert cli.plain_run(["run", "card_testing"])["patterns"][0].endswith(os.path.join("patterns", "card_testing.pattern"))


def test_the_plain_reading_knows_every_option_and_default_of_run():
    params = {p.name: p for p in cli_click.run_cmd.params if isinstance(p, click.Option)}
    declared = {o: p.name for p in params.values() for o in (*p.opts, *p.secondary_opts)}
    mine = {o: name for o, (name, _kind) in cli._OPTIONS.items()}
    assert mine == declared
    ctx = click.Context(cli_click.run_cmd)  # (a flag's ``default`` is a sentinel from click 8.3 on: as resolved)
    assert cli._DEFAULTS == {name: p.get_default(ctx, call=False) for name, p in params.items()}
    for name, p in params.items():
        kind = next(k for _o, (n, k) in cli._OPTIONS.items() if n == name)
        if isinstance(p.type, click.Choice):
            assert kind[0] == "choice" and tuple(p.type.choices) == (kind[1] or tuple(TIME_UNITS))
        elif isinstance(p.type, click.types.IntRange):
            assert kind == ("int", p.type.min)
        elif isinstance(p.type, click.types.FloatRange):
            assert kind == ("float", p.type.min)
        else:
            assert kind == ("flag" if p.is_flag else "str")


_TOKENS = st.sampled_from(["run", CARD, "card_testing", "patterns", "-", "--", "", "x", "0", "1", "07", "1.5",
                           "-1", "ms", "csv", "skip", "--input=a", "-qi", "-h", *cli._OPTIONS])


@settings(max_examples=300, deadline=None)
@given(st.lists(_TOKENS, max_size=8))
def test_any_command_line_is_read_as_click_reads_it_or_left_to_click(argv):
    with pytest.MonkeyPatch.context() as mp:
        _agree(mp, ["run", *argv])
