"""The thesis' benchmark queries Q1-Q12 (Idris 2018, Table 4.1, appendix A.2) and their streams (section 4.5.1).

Why a module of its own: the same query must exist three times, and identically: as a ``.pattern`` file
for cep (an AND over R, S, T with the inequalities in WHERE; on temporally ordered streams also as a
SEQ), as Esper EPL (appendix A.2.2, with ``#keepall`` windows so that nothing expires, as the thesis'
``win(10000)`` on streams of at most 7k tuples per relation), and as an oracle that counts the exact
number of composite events from the stream file, so every system's count can be checked.

Streams (section 4.5.1): N/k insertions per relation, interleaved uniformly at random. In a
*random-ordered* stream the inequality attributes are uniform integers; equality attributes (``k``) are
uniform in 1..K (K = 200 in the thesis). In a *temporally ordered* stream every inequality attribute
(a, d, e, g) of a new tuple is larger than in every earlier tuple (here: the record number). ``c`` and
``i`` are strings, all else integers. The selectivity knob ``x`` (section 4.5.2, "selective inequality
joins"; random order only) lets only a fraction ``x`` of the R and T tuples join: the others get an
``a`` above every value (R) or a ``g`` below every value (T). So Q1's output is about ``x/2`` of the
Cartesian product and Q4's about ``x^2/6``, and every joining tuple still joins with many others (a
low-variance output, unlike shrinking a value range, where a handful of extreme tuples decide it).
"""

from __future__ import annotations

import random
from bisect import bisect_left, bisect_right
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import orjson

VALUE_RANGE = 1_000_000
GEN_VERSION = 2  # part of the file names: a changed generator never reuses an old file

SCHEMA = {  # every relation carries every attribute any query reads; queries ignore the rest
    "R": ("a", "b", "c", "k"),
    "S": ("d", "e", "f", "k"),
    "T": ("g", "h", "i", "k"),
}
ALIAS = {"R": "r", "S": "s", "T": "t"}
OWNER = {a: rel for rel, attrs in SCHEMA.items() for a in attrs if a != "k"}


@dataclass(frozen=True)
class Query:
    """One query of Table 4.1: relations, inequalities, where k joins, and the output columns."""

    name: str
    rels: str  # "RS" or "RST"
    ineqs: tuple[tuple[str, str], ...]  # (x, y) means x < y
    key: str | None  # "RS": r.k = s.k ; "ST": s.k = t.k
    columns: tuple[str, ...]  # output attributes (SELECT list); k is the shared key
    projected: bool

    def column_source(self, col: str) -> str:
        """``alias.attr`` that a column is read from (k from the first relation that has it)."""
        if col == "k":
            assert self.key is not None
            return f"{ALIAS[self.key[0]]}.k"
        return f"{ALIAS[OWNER[col]]}.{col}"


def _q(name: str, rels: str, ineqs: str, key: str | None, cols: str, projected: bool = False) -> Query:
    pairs = tuple(tuple(p.split("<")) for p in ineqs.split(",")) if ineqs else ()
    return Query(name, rels, pairs, key, tuple(cols.split(",")), projected)  # type: ignore[arg-type]


QUERIES: dict[str, Query] = {
    q.name: q
    for q in (
        _q("q1", "RS", "a<d", None, "a,b,c,d,e,f"),
        _q("q2", "RS", "a<d", "RS", "a,b,c,k,d,e,f"),
        _q("q3", "RST", "a<d,e<g", None, "a,b,c,d,e,f,g,h,i"),
        _q("q4", "RST", "a<d,d<g", None, "a,b,c,d,e,f,g,h,i"),
        _q("q5", "RST", "a<d,d<g", "RS", "a,b,c,k,d,e,f,g,h,i"),
        _q("q6", "RST", "a<d,d<g", "ST", "a,b,c,d,e,f,k,g,h,i"),
        _q("q7", "RST", "a<d,d<g", None, "a,b,d,e,f,g,h", True),
        _q("q8", "RST", "a<d,d<g", "RS", "a,d,e,f,g,h,k", True),
        _q("q9", "RST", "a<d,d<g", "ST", "d,e,f,g,h,k", True),
        _q("q10", "RST", "a<d,d<g", None, "b,c,e,f,h,i", True),
        _q("q11", "RST", "a<d,d<g", "RS", "b,c,e,f,h,i", True),
        _q("q12", "RST", "a<d,d<g", "ST", "b,c,e,f,h,i", True),
    )
}


# ---------------------------------------------------------------------------
# query texts


def pattern_text(q: Query, seq: bool = False) -> str:
    """The query as a ``.pattern`` (docs/language.md section 2). ``seq``: SEQ order instead of the inequalities.

    On a temporally ordered stream ``x < y`` between attributes of two relations holds exactly when the
    first tuple arrived first, so SEQ(R, S[, T]) with only the equality is the same query.
    """
    elems = ", ".join(f"{rel} {ALIAS[rel]}" for rel in q.rels)
    conds = []
    if not seq:
        conds += [f"{ALIAS[OWNER[x]]}.{x} < {ALIAS[OWNER[y]]}.{y}" for x, y in q.ineqs]
    if q.key:
        conds.append(f"{ALIAS[q.key[0]]}.k = {ALIAS[q.key[1]]}.k")
    name = q.name + ("_seq" if seq else "")
    lines = [f"-- Thesis {q.name.upper()} (Table 4.1){' as a SEQ, for temporally ordered streams' if seq else ''}.",
             f"PATTERN {name}", f"  {'SEQ' if seq else 'AND'}({elems})"]
    if conds:
        lines.append("  WHERE " + " AND ".join(conds))
    lines.append("  EMIT " + ", ".join(f"{q.column_source(c)} AS {c}" for c in q.columns))
    return "\n".join(lines) + "\n"


def epl_schemas(rels: str) -> str:
    """``create map schema`` statements for the relations (all integers but c and i)."""
    out = []
    for rel in rels:
        props = ", ".join(f"{a} {'string' if a in ('c', 'i') else 'long'}" for a in SCHEMA[rel])
        out.append(f"@public @buseventtype create map schema {rel}({props}, ts long);")
    return "\n".join(out) + "\n"


def epl_text(q: Query) -> str:
    """Appendix A.2.2's EPL: a join of keep-all windows (nothing expires, as in the thesis' runs)."""
    frm = ", ".join(f"{rel}#keepall as {ALIAS[rel]}" for rel in q.rels)
    conds = [f"{ALIAS[OWNER[x]]}.{x} < {ALIAS[OWNER[y]]}.{y}" for x, y in q.ineqs]
    if q.key:
        conds.append(f"{ALIAS[q.key[0]]}.k = {ALIAS[q.key[1]]}.k")
    sel = ", ".join(f"{q.column_source(c)} as {c}" for c in q.columns)
    return epl_schemas(q.rels) + f"@name('{q.name}') select {sel} from {frm} where {' and '.join(conds)};\n"


def epl_seq_text(q: Query) -> str:
    """The SEQ form in EPL, for temporally ordered streams: a pattern with ``every`` on each element.

    This is the automaton-style plan (one sub-pattern instance per partial match, as SASE or Tesla
    keep), next to the join plan of appendix A.2.2; on a temporally ordered stream both give the same
    composite events.
    """
    parts = []
    for idx, rel in enumerate(q.rels):
        cond = ""
        if q.key and rel == q.key[1] and idx > 0:
            cond = f"(k = {ALIAS[q.key[0]]}.k)"
        parts.append(f"every {ALIAS[rel]}={rel}{cond}")
    sel = ", ".join(f"{q.column_source(c)} as {c}" for c in q.columns)
    return epl_schemas(q.rels) + f"@name('{q.name}_seq') select {sel} from pattern [{' -> '.join(parts)}];\n"


def write_query_files(directory: Path) -> None:
    """Write q1..q12 (.pattern, _seq.pattern, .epl) into ``directory`` (deterministic; committed)."""
    directory.mkdir(parents=True, exist_ok=True)
    for q in QUERIES.values():
        for path, text in (
            (directory / f"{q.name}.pattern", pattern_text(q)),
            (directory / f"{q.name}_seq.pattern", pattern_text(q, seq=True)),
            (directory / f"{q.name}.epl", epl_text(q)),
            (directory / f"{q.name}_seq.epl", epl_seq_text(q)),
        ):
            if not path.exists() or path.read_text() != text:
                path.write_text(text)


# ---------------------------------------------------------------------------
# streams


@dataclass(frozen=True)
class StreamSpec:
    """What a thesis stream file holds; equal specs give byte-identical files."""

    rels: str
    n: int
    order: str  # "random" or "temporal"
    x: float = 1.0  # selectivity shrink of d and g (random order only)
    key_domain: int = 200
    seed: int = 7

    @property
    def filename(self) -> str:
        x = f"_x{self.x:g}" if self.x != 1.0 else ""
        kd = f"_k{self.key_domain}" if self.key_domain != 200 else ""
        return f"thesis_{self.rels}_{self.order}_{self.n}{x}{kd}_s{self.seed}_v{GEN_VERSION}.jsonl"


def generate(spec: StreamSpec) -> list[dict]:
    """The stream's records in order (section 4.5.1)."""
    rng = random.Random(f"{spec.seed}:{spec.rels}:{spec.n}:{spec.order}:{spec.x}:{spec.key_domain}")
    per = spec.n // len(spec.rels)
    order = [rel for rel in spec.rels for _ in range(per)]
    rng.shuffle(order)
    out = []
    for pos, rel in enumerate(order):
        rec: dict = {"type": rel, "ts": pos}
        for attr in SCHEMA[rel]:
            if attr == "k":
                rec["k"] = rng.randint(1, spec.key_domain)
            elif attr in ("c", "i"):
                rec[attr] = f"{attr}{rng.randint(0, 99999):05d}"
            elif spec.order == "temporal" and attr in ("a", "d", "e", "g"):
                rec[attr] = pos + 1
            elif attr in ("a", "g") and spec.x < 1.0 and rng.random() >= spec.x:
                # a tuple that joins with nothing: a above every d, g below every d (distinct values,
                # so the knob does not also create a heavily duplicated key)
                v = rng.randint(1, VALUE_RANGE)
                rec[attr] = VALUE_RANGE + v if attr == "a" else -v
            else:
                rec[attr] = rng.randint(1, VALUE_RANGE)
        out.append(rec)
    return out


def write_stream(spec: StreamSpec, directory: Path) -> Path:
    """Write the stream as JSON lines (once; reused if it exists)."""
    path = directory / spec.filename
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            for rec in generate(spec):
                f.write(orjson.dumps(rec, option=orjson.OPT_APPEND_NEWLINE))
        tmp.rename(path)
    return path


# ---------------------------------------------------------------------------
# oracle


def expected_count(q: Query, records: list[dict]) -> int:
    """The exact number of composite events (one per tuple of input events), counted by sorting.

    Every query here is a chain around S: count, for each S tuple, the R tuples below it and the T
    tuples above it (within its k group where k joins), and multiply.
    """
    by = defaultdict(list)
    for r in records:
        by[r["type"]].append(r)

    def sorted_by(rel: str, attr: str, keyed: bool) -> dict:
        groups: dict = defaultdict(list)
        for r in by[rel]:
            groups[r["k"] if keyed else None].append(r[attr])
        for v in groups.values():
            v.sort()
        return groups

    (ra, sd), *rest = q.ineqs
    r_idx = sorted_by("R", ra, q.key == "RS")
    t_idx = None
    if rest:
        (s_attr, tg) = rest[0]
        t_idx = sorted_by("T", tg, q.key == "ST")
    total = 0
    for s in by["S"]:
        lo = r_idx.get(s["k"] if q.key == "RS" else None, [])
        n_r = bisect_left(lo, s[sd])
        if not n_r:
            continue
        if t_idx is None:
            total += n_r
            continue
        hi = t_idx.get(s["k"] if q.key == "ST" else None, [])
        n_t = len(hi) - bisect_right(hi, s[s_attr])
        total += n_r * n_t
    return total
