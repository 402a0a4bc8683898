"""``cep check`` prints, byte for byte, what it printed before it was made faster (issue 12).

``tests/data/check_golden.json`` holds 400 inputs (shipped and test patterns,
hypothesis-drawn ones, ``bench.pattern_size`` shapes and seeded token mutations,
most of them wrong in some way) with the stdout, stderr and exit code of
``cep check`` at ac158b5, before the compile phase was reshaped.  Any change to a
summary, a diagnostic's words or order, or an exit code fails here; the full
comparison (about 5,000 inputs and the 10,000-pattern files, against any other
checkout) is ``python -m bench.check_equivalence --base DIR``, which also writes
this file (``--golden``).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

from cep.commands.check import run_check

GOLDEN = Path(__file__).resolve().parent / "data" / "check_golden.json"


def test_check_prints_what_it_printed_before(tmp_path, monkeypatch):
    cases = json.loads(GOLDEN.read_text())
    assert len(cases) >= 300 and {c["rc"] for c in cases} == {0, 2}
    monkeypatch.chdir(tmp_path)  # (file names print as given: relative, as recorded)
    differ = []
    for case in cases:
        for name, text in zip(case["names"], case["files"], strict=True):
            (tmp_path / name).write_text(text, encoding="utf-8")
        out, err = io.StringIO(), io.StringIO()
        rc = run_check(case["names"], out, err)
        if (rc, out.getvalue(), err.getvalue()) != (case["rc"], case["out"], case["err"]):
            differ.append(case["names"][0])
    assert not differ, f"{len(differ)} of {len(cases)} inputs check differently, first {differ[:5]}"
