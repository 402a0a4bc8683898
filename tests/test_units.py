"""Duration units, exit codes and partition keys each have one home, and every user of them agrees.

Durations: a spelling accepted by ``WITHIN`` is accepted by ``--lateness`` (and ``cep spark
--lateness``) and means the same amount, and a spelling rejected by one is rejected by the other.
"""

from __future__ import annotations

import pytest
from cephelp import cep, lines, write

from cep import units
from cep.commands.run import RunError, parse_lateness
from cep.errors import PatternError
from cep.event import Event
from cep.lang.compiler import compile_text
from cep.lang.gcq import read_key

SPELLINGS = sorted(units.DURATION_UNITS)


def within(spelling: str, time_unit: str = "s"):
    (cp,) = compile_text(f"PATTERN p SEQ(A a, B b) WITHIN 3 {spelling}", time_unit=time_unit)
    return cp.within


@pytest.mark.parametrize("spelling", SPELLINGS + [s.upper() for s in SPELLINGS])
@pytest.mark.parametrize("time_unit", sorted(units.TIME_UNITS))
def test_every_spelling_means_the_same_in_within_and_lateness(spelling, time_unit):
    canonical = units.DURATION_UNITS[spelling.lower()]
    expected = 3 * units.UNIT_SECONDS[canonical] * units.TIME_UNITS[time_unit]
    assert within(spelling, time_unit) == pytest.approx(expected)
    assert parse_lateness(f"3 {spelling}", time_unit) == within(spelling, time_unit)
    assert parse_lateness(f"3{spelling}", time_unit) == within(spelling, time_unit)


@pytest.mark.parametrize("spelling", ["secs", "mins", "seconds", "minutes", "hours", "days", "milliseconds"])
def test_plural_spellings_are_accepted_everywhere(spelling):
    """The bug: `--lateness 5 secs` was accepted while `WITHIN 5 secs` was rejected."""
    assert within(spelling) == parse_lateness(f"3 {spelling}") > 0


@pytest.mark.parametrize("spelling", ["parsecs", "hr", "fortnights", "minuts", "us"])
def test_unknown_spellings_are_rejected_everywhere(spelling):
    with pytest.raises(PatternError, match="unknown duration unit"):
        within(spelling)
    with pytest.raises(RunError, match="bad duration"):
        parse_lateness(f"3 {spelling}")


def test_no_unit_is_timestamp_units():
    assert within("", "ms") == 3 == parse_lateness("3", "ms")
    assert units.parse_duration("1.5 min") == 90 and units.parse_duration(".5s", "ms") == 500


def test_spark_cli_reads_lateness_with_the_same_table():
    """`cep spark` validates --lateness before starting Spark, with the same units (no Spark needed)."""
    from cep.connectors import spark_cli

    args = spark_cli.build_parser().parse_args(["p.pattern", "-i", "d", "-o", "o", "--checkpoint", "c",
                                                "--lateness", "5 secs"])
    assert units.parse_duration(args.lateness, args.time_unit) == 5
    assert spark_cli.build_parser().parse_args(
        ["p", "-i", "d", "-o", "o", "--checkpoint", "c"]).time_unit in units.TIME_UNITS


def test_cli_accepts_within_and_lateness_in_secs(tmp_path):
    pat = write(tmp_path / "p.pattern", "PATTERN p SEQ(A a, B b) PARTITION BY k WITHIN 10 secs\n")
    data = b'{"type":"B","ts":10,"k":1}\n{"type":"A","ts":5,"k":1}\n'
    r = cep("run", pat, "--lateness", "5 secs", input=data)
    assert r.returncode == 0, r.stderr
    assert len(lines(r.stdout)) == 1


# ----------------------------------------------------------------- exit codes


def test_exit_codes_are_one_table():
    from cep.connectors import spark_cli

    from cep import cli, exit_codes
    from cep.commands import check, run

    assert (exit_codes.EXIT_OK, exit_codes.EXIT_OTHER, exit_codes.EXIT_PATTERN, exit_codes.EXIT_RECORD) == (0, 1, 2, 3)
    for mod in (cli, check, run, spark_cli):
        for name in ("EXIT_OK", "EXIT_OTHER", "EXIT_PATTERN", "EXIT_RECORD", "EXIT_INTERRUPTED"):
            if hasattr(mod, name):
                assert getattr(mod, name) is getattr(exit_codes, name), (mod.__name__, name)


def test_exit_statuses_of_the_commands(tmp_path):
    bad = write(tmp_path / "bad.pattern", "PATTERN p SEQ(A a) WITHIN 5 fortnights\n")
    good = write(tmp_path / "good.pattern", "PATTERN p SEQ(A a, B b)\n")
    assert cep("check", bad).returncode == 2
    assert cep("run", bad, input=b"").returncode == 2
    assert cep("check", good).returncode == 0
    assert cep("run", good, input=b"{}\n").returncode == 3
    assert cep("run", good, "--lateness", "x", input=b"").returncode == 1


# ------------------------------------------------------------- partition keys


KEYED = """
PATTERN k
  SEQ(A a, B b)
  WHERE a.acct = b.owner AND a.ts > 0
  PARTITION BY region
"""


def test_partition_key_is_read_by_one_rule():
    """The engine's key, Kafka record keys and Spark's routing all read key_attrs with read_key."""
    from cep.io.writers import kafka_key, make_key_fn
    from cep.plan.partition import partition_attrs
    from cep.runtime.engine import Engine

    (cp,) = compile_text(KEYED)
    a, b = cp.atoms
    # every variable shared by all aliases is part of the key: a.acct = b.owner too
    assert cp.key_attrs(a) == ("acct", "region") and cp.key_attrs(b) == ("owner", "region")
    assert partition_attrs(cp) == {"A": ("acct", "region"), "B": ("owner", "region")}
    ev_a = Event("A", 1, {"acct": 7, "region": "eu"}, "1")
    assert read_key(ev_a, cp.key_attrs(a)) == (7, "eu")
    assert read_key(Event("A", 2, {}, "2"), ("region", "ts")) == (None, 2)
    eng = Engine([cp])
    eng.push(ev_a)
    (out,) = eng.push(Event("B", 2, {"owner": 7, "region": "eu"}, "2"))
    assert out.key == (7, "eu")
    assert make_key_fn(cp)(out) == kafka_key([7, "eu"]) == b'[7,"eu"]'
    (plain,) = compile_text("PATTERN q SEQ(A a, B b)")
    assert plain.key_attrs(plain.atoms[0]) == () and make_key_fn(plain) is None
    assert partition_attrs(plain) is None
