"""``cep.longints``: the two answers to 'does this text hold 19 digits in a row' agree."""

from __future__ import annotations

import random

import pytest


def test_the_numpy_view_finds_the_runs_the_translate_finds():
    """``has_long_digit_run_numpy`` (the Spark route step's, on a numpy view) answers as ``has_long_digit_run``
    (the reader's and the state decoder's) on random bytes with digit runs of every length around 19, at the
    start, the end and alone, and on texts shorter than a run."""
    pytest.importorskip("numpy")
    from cep.longints import LONG_RUN, has_long_digit_run, has_long_digit_run_numpy

    rnd = random.Random(19)
    cases = [b"", b"1", b"1" * 18, b"1" * 19, b"1" * 40, b"x" + b"9" * 19, b"0" * 19 + b"x", b"/" * 30, b":" * 30]
    for _ in range(3000):
        parts = []
        for _ in range(rnd.randrange(1, 8)):
            parts.append(bytes(rnd.choice(b"0123456789") for _ in range(rnd.choice([0, 1, 5, 17, 18, 19, 20, 33]))))
            parts.append(bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 4))))
        cases.append(b"".join(parts))
    hits = 0
    for blob in cases:
        want = has_long_digit_run(blob)
        assert has_long_digit_run_numpy(blob) is want, blob
        hits += want
    assert 100 < hits < len(cases) - 100 and len(LONG_RUN) == 19


def test_the_numpy_view_in_windows_finds_runs_across_their_edges():
    """``has_long_digit_run_numpy`` looks at a blob in windows of ``chunk`` bytes: a run of 19 digits that
    starts anywhere (each place of a 400-byte blob in turn, so across every window's edge), and one of 18,
    answer as ``has_long_digit_run`` for windows far smaller than a run, about a run's length and larger."""
    pytest.importorskip("numpy")
    from cep.longints import has_long_digit_run, has_long_digit_run_numpy

    for chunk in (1, 2, 7, 18, 19, 20, 64, 1 << 18):
        for size in (18, 19):
            for at in range(0, 400 - size + 1, 1 if chunk < 64 else 7):
                blob = b"x" * at + b"7" * size + b"x" * (400 - size - at)
                assert has_long_digit_run_numpy(blob, chunk) is has_long_digit_run(blob) is (size == 19), (chunk, at)
        assert has_long_digit_run_numpy(b"", chunk) is False
        assert has_long_digit_run_numpy(b"1" * 19, chunk) is True
