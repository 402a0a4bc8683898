"""Issue 12, security: a saved engine state cannot run code, and a bad one is one clear line.

The reproducer of the issue: a checkpoint whose state is ``CEPSTATE`` + a pickle whose
``__reduce__`` returns ``(os.system, ("touch PWNED",))``.  With the plain-data format
it is refused as foreign and nothing runs.  Truncated, mutated and random states are
refused with ``StateError`` (engine) or one ``cep: error:`` line and exit 1 (CLI),
never a traceback.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import random
import re

import orjson
import pytest
from cephelp import PATTERNS, cep
from hypothesis import given, settings
from hypothesis import strategies as st

from cep.event import Event
from cep.io import checkpoint as ckpt
from cep.lang.compiler import compile_text
from cep.runtime.engine import Engine, StateError

CARD_FILE = PATTERNS / "card_testing.pattern"
CARD = CARD_FILE.read_text()


class _Evil:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def _evil_state(path) -> bytes:
    return b"CEPSTATE" + pickle.dumps({"version": 1, "x": _Evil(str(path))})


def _state_with_events() -> tuple[list, bytes]:
    cps = compile_text(CARD)
    eng = Engine(cps, lateness=5)
    for i in range(40):
        eng.push(Event("Txn", 1000 + i, {"type": "Txn", "card": f"c{i % 4}", "amount": [5, 50, 900][i % 3],
                                          "note": None, "flag": i % 2 == 0, "big": 10**30 + i, "u": "é✓"},
                       str(i + 1)))
    return cps, eng.dumps()


def test_crafted_pickle_state_runs_nothing(tmp_path):
    pwned = tmp_path / "PWNED"
    cps = compile_text(CARD)
    with pytest.raises(StateError, match="format 1"):
        Engine.loads(_evil_state(pwned), cps)
    assert not pwned.exists()


def test_crafted_checkpoint_file_runs_nothing_from_the_cli(tmp_path):
    pwned = tmp_path / "PWNED"
    inp = tmp_path / "in.jsonl"
    inp.write_bytes(b'{"type":"Txn","ts":1,"card":"c","amount":5}\n')
    ck = tmp_path / "ck"
    # the fingerprint must fit for the state to be read at all: take the real one
    r0 = cep("run", CARD_FILE, "-i", inp, "-o", tmp_path / "o", "--checkpoint", tmp_path / "good", "-q")
    assert r0.returncode == 0, r0.stderr
    good = ckpt.load(str(tmp_path / "good"))
    ckpt.save(str(ck), ckpt.Checkpoint(good.fingerprint, good.position, _evil_state(pwned), paths=good.paths,
                                       input=good.input, sizes=good.sizes))
    r = cep("run", CARD_FILE, "-i", inp, "-o", tmp_path / "o", "--checkpoint", ck, cwd=tmp_path)
    assert r.returncode == 1
    assert not pwned.exists() and not (tmp_path / "PWNED").exists()
    err = r.stderr.decode()
    assert err.count("\n") == 1 and err.startswith("cep: error:") and "Traceback" not in err
    assert "format 1" in err


def test_roundtrip_keeps_values_exact():
    cps, data = _state_with_events()
    eng = Engine.loads(data, cps)
    assert eng.dumps() == data
    big = [e.fields["big"] for e in eng.events.values()]
    assert all(type(b) is int and b >= 10**30 for b in big) and big
    eng.advance_watermark(math.inf)
    assert Engine.loads(eng.dumps(), cps).watermark == math.inf


def test_every_truncation_is_a_state_error():
    cps, data = _state_with_events()
    for n in list(range(0, 40)) + list(range(40, len(data), 37)):
        with pytest.raises(StateError):
            Engine.loads(data[:n], cps)


def test_other_format_and_wrong_shapes_are_refused():
    cps, data = _state_with_events()
    head, _, body = data.partition(b"\n")
    doc = json.loads(body)

    def refused(d: dict, match: str) -> None:
        with pytest.raises(StateError, match=match):
            Engine.loads(head + b"\n" + json.dumps(d).encode(), cps)

    refused({**doc, "format": 99}, "format 99")
    refused({**doc, "format": 2}, "format 2 cannot be read .* start without the old state")  # pending per match
    refused({**doc, "pending": [[[[0], 11, True]]]}, "a pending match")  # format 2's entry in a format 3 document
    refused({**doc, "events": [[0, "Txn", "soon", {}, "1", "+"]]}, "event time")
    refused({**doc, "events": [[0, "Txn", 1, {"a": [1]}, "1", "+"]]}, "field 'a'")
    refused({**doc, "events": [[0, "Txn", 1, {}, "1", "*"]]}, "op")
    refused({**doc, "events": doc["events"][:1] * 2}, "serials repeat")
    refused({**doc, "stats": {}}, "counters")
    refused({**doc, "serial": -1}, "serial")
    refused({k: v for k, v in doc.items() if k != "watermark"}, "watermark")
    with pytest.raises(StateError):
        Engine.loads(head + b"\n" + b"[" * 100_000, cps)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.integers(min_value=0, max_value=2))
def test_random_states_raise_only_state_error(blob, prefix):
    cps = compile_text(CARD)
    data = [b"", b"CEPSTATE", b"CEPSTATE\n"][prefix] + blob
    with pytest.raises(StateError):
        Engine.loads(data, cps)


def test_mutated_states_load_or_raise_state_error():
    cps, data = _state_with_events()
    rnd = random.Random(5)
    for _ in range(400):
        b = bytearray(data)
        for _ in range(rnd.randint(1, 4)):
            b[rnd.randrange(9, len(b))] = rnd.randrange(256)
        try:
            Engine.loads(bytes(b), cps)
        except StateError:
            pass


def test_checkpoint_with_garbage_state_is_one_line(tmp_path):
    inp = tmp_path / "in.jsonl"
    inp.write_bytes(b'{"type":"Txn","ts":1,"card":"c","amount":5}\n' * 3)
    ck = tmp_path / "ck"
    r0 = cep("run", CARD_FILE, "-i", inp, "-o", tmp_path / "o", "--checkpoint", ck, "-q")
    assert r0.returncode == 0
    whole = ck.read_bytes()
    head, _, state = whole.partition(b"\n")
    h = orjson.loads(head)
    for bad in (state[: len(state) // 2], b"CEPSTATE\n{" + b"x" * 10, os.urandom(64)):
        h["state_len"] = len(bad)
        ck.write_bytes(orjson.dumps(h) + b"\n" + bad)
        r = cep("run", CARD_FILE, "-i", inp, "-o", tmp_path / "o", "--checkpoint", ck)
        err = r.stderr.decode()
        assert r.returncode == 1 and err.count("\n") == 1 and "Traceback" not in err, err
    ck.write_bytes(whole[: len(whole) - 5])  # a truncated file
    r = cep("run", CARD_FILE, "-i", inp, "-o", tmp_path / "o", "--checkpoint", ck)
    assert r.returncode == 1 and b"truncated" in r.stderr and r.stderr.count(b"\n") == 1


def test_nothing_in_the_code_unpickles():
    import pathlib

    root = pathlib.Path(__file__).resolve().parent.parent
    for folder in ("cep", "connectors"):
        for f in (root / folder).rglob("*.py"):
            text = f.read_text()
            assert not re.search(r"import pickle|pickle\.loads?\(|Unpickler", text), f


def test_parser_tables_are_cached_in_a_private_directory(tmp_path, monkeypatch):
    """Lark's default cache is a pickle under a predictable name in the shared temp dir."""
    import stat

    from cep.lang.grammar_cache import lark_cache

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "c"))
    path = lark_cache()
    assert isinstance(path, str) and path.startswith(str(tmp_path / "c" / "cep"))
    assert stat.S_IMODE(os.stat(tmp_path / "c" / "cep").st_mode) == 0o700
    os.chmod(tmp_path / "c" / "cep", 0o777)  # anyone could plant a file: no cache at all
    assert lark_cache() is False
    # Lark (and so its cache) is used only to locate a syntax error
    r = cep("check", CARD_FILE, env={"XDG_CACHE_HOME": str(tmp_path / "d")})
    assert r.returncode == 0 and not (tmp_path / "d" / "cep").exists()
    (tmp_path / "bad.pattern").write_text("PATTERN p SEQ(A a,) WITHIN 1 h\n")
    r = cep("check", tmp_path / "bad.pattern", env={"XDG_CACHE_HOME": str(tmp_path / "d")})
    assert r.returncode == 2 and b"bad.pattern:1:19: expected" in r.stderr and list((tmp_path / "d" / "cep").iterdir())


def test_the_state_document_is_read_as_stdlib_json_reads_it():
    """``decode_state`` reads the document with orjson unless the text holds a run of 19 digits (an integer orjson
    would read as a float) or something orjson refuses (the constants, a lone surrogate, a float out of range):
    those are read by stdlib ``json``, so every document means what it meant."""
    from cep.runtime import state as S

    texts = [b'{"a": [1, -0, 2.5, 1e-400, 18446744073709551615, "x\\u00e9", null, true]}', b'{"a": 1, "a": 2}',
             b'{"big": 123456789012345678901234567890, "neg": -9223372036854775809}', b'{"w": Infinity, "n": -Infinity}',
             b'{"f": 1E400}', b'{"s": "\\ud800"}', b'{"k": 1.2345678901234567890123}']
    for text in texts:
        want = json.loads(text, parse_constant=S._constant)
        got = S._document(text)
        assert repr(got) == repr(want) and [type(v) for v in got.values()] == [type(v) for v in want.values()], text
    for bad in (b'{"a": 1', b'{"a": NaN1}', b'\xff'):
        with pytest.raises(ValueError):
            S._document(bad)


def test_a_state_is_written_with_orjson_unless_a_number_is_not_finite():
    """``encode_state`` writes with orjson when every number is finite (the same document as stdlib ``json``
    writes); an infinite or NaN field, time or watermark (orjson would write ``null``) goes through ``json``'s
    constants, and reads back as it was."""
    from cep.runtime import state as S

    cps = compile_text(CARD)
    eng = Engine(cps, lateness=5)
    for i, amount in enumerate([5, 50.5, 900, 1e-7, 1e16]):
        eng.push(Event("Txn", 1000 + i, {"type": "Txn", "card": "c", "amount": amount, "u": "é\n\x01"}, str(i)))
    data = eng.dumps()
    head, _, body = data.partition(b"\n")
    doc = json.loads(body)
    assert json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode() != body  # (orjson's floats: 1e16)
    assert Engine.loads(data, cps).dumps() == data
    for odd in (math.inf, -math.inf, math.nan):
        other = Engine(cps, lateness=5)
        other.push(Event("Txn", 1000, {"type": "Txn", "card": "c", "amount": 5, "x": odd}, "1"))
        back = Engine.loads(other.dumps(), cps)
        assert repr([e.fields["x"] for e in back.events.values()]) == repr([odd])
    assert S._finite({"lateness": 5, "max_ts": 2.5, "watermark": None, "events": [[0, "T", 1.5, {"a": 1.0}]]})
    assert not S._finite({"lateness": 5, "max_ts": 2.5, "watermark": math.inf, "events": []})
    assert not S._finite({"lateness": 5, "max_ts": None, "watermark": None, "events": [[0, "T", math.nan, {}]]})
