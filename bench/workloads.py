"""Which runs a benchmark profile makes: the thesis' Q1-Q12, the CEP patterns, the selectivity sweep.

Why the sizes are what they are: the thesis' outputs are huge (Table 4.2: 18M-411M composite events at
12k/21k tuples), far beyond what a 5-minute run on 2 cores can write from Python. So the uniform
streams (the thesis' distribution) run at sizes whose outputs stay around 10^5, and the thesis' own
stream sizes (12k, 2.7k, 21k) run with the selectivity knob of section 4.5.2 (a scaled key domain or a
shrunk inequality range), which keeps the number of input tuples and cuts the output.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bench import streams, thesis

BENCH_DIR = Path(__file__).resolve().parent
QUERY_DIR = BENCH_DIR / "queries"
CEP_EPL_DIR = BENCH_DIR / "epl"
PATTERNS_DIR = BENCH_DIR.parent / "patterns"


@dataclass
class Workload:
    """One input file and the queries over it that every system runs."""

    family: str  # thesis | cep | sweep
    name: str  # unique row label
    query: str
    order: str  # random | temporal | time (CEP streams: time-ordered)
    n: int
    patterns: list[Path]
    epl: Path | None
    make_input: object  # () -> Path (generated on demand)
    expected: object = None  # (records) -> int, the oracle
    time_unit: str = "s"
    cli: bool = False  # also time `cep run` end to end
    seq_patterns: list[Path] | None = None  # the SEQ form (temporal streams)
    params: dict = field(default_factory=dict)
    note: str = ""
    window: float | None = None  # WITHIN in time units, for the window-occupancy figure
    esper_time_scale: float = 1000.0
    epl_variants: dict = field(default_factory=dict)  # extra Esper formulations: system name -> .epl


# outputs ~ (N/2)^2/2, (N/3)^3/4, (N/3)^3/6, (N/3)^3/6/200 for q1, q3, q4-like, keyed 3-way
UNIFORM_SIZES = {
    "quick": {"q1": [300], "q2": [2000], "q3": [90], "q4": [90], "q5": [450]},
    "default": {"q1": [800], "q2": [6000], "q3": [180], "q4": [180], "q5": [900]},
    "full": {"q1": [600, 1200, 2400], "q2": [3000, 12000, 24000], "q3": [150, 300, 600],
             "q4": [150, 300, 600], "q5": [750, 1500, 3000]},
}
SHAPE = {"q1": "q1", "q2": "q2", "q3": "q3", "q4": "q4", "q7": "q4", "q10": "q4",
         "q5": "q5", "q6": "q5", "q8": "q5", "q9": "q5", "q11": "q5", "q12": "q5"}

# the thesis' stream sizes (Table 4.2), made selective (section 4.5.2) so the output stays ~5*10^4:
# Q1 ~ (N/2)^2 x/2, Q3 ~ (N/3)^3 x^2/4, Q4 ~ (N/3)^3 x^2/6, Q5 ~ (N/3)^3/6/key_domain
THESIS_SIZE = {
    "q1": (12000, {"x": 0.0028}), "q2": (12000, {}), "q3": (2700, {"x": 0.0166}),
    "q4": (2700, {"x": 0.0203}), "q7": (2700, {"x": 0.0203}), "q10": (2700, {"x": 0.0203}),
    "q5": (21000, {"key_domain": 1143333}), "q6": (21000, {"key_domain": 1143333}),
    "q8": (21000, {"key_domain": 1143333}), "q9": (21000, {"key_domain": 1143333}),
    "q11": (21000, {"key_domain": 1143333}), "q12": (21000, {"key_domain": 1143333}),
}
THESIS_SIZE_QUERIES = {"quick": (), "default": ("q1", "q2", "q4", "q5"), "full": tuple(THESIS_SIZE)}

SWEEP = {"quick": [1 / 256, 1 / 32, 1 / 8], "default": [1 / 256, 1 / 64, 1 / 16, 1 / 8],
         "full": [1 / 256, 1 / 64, 1 / 16, 1 / 4, 1.0]}
SWEEP_N = 4000
# the same on the three-way chain Q4 (output ~ (N/3)^3 x^2/6), where enumeration walks a deeper tree
SWEEP3 = {"quick": [], "default": [1 / 16, 1 / 8, 1 / 4], "full": [1 / 16, 1 / 8, 1 / 4, 1 / 2]}
SWEEP3_N = 900

CARD_SIZES = {"quick": [(100_000, 1_000)], "default": [(1_000_000, 10_000)],
              "full": [(100_000, 1_000), (1_000_000, 10_000)]}


def _thesis_workload(q: thesis.Query, spec: thesis.StreamSpec, data_dir: Path, family: str,
                     label: str) -> Workload:
    def make() -> Path:
        return thesis.write_stream(spec, data_dir)

    seq = [QUERY_DIR / f"{q.name}_seq.pattern"] if spec.order == "temporal" else None
    params = {"x": spec.x, "key_domain": spec.key_domain}
    # the automaton plan in Esper for the full joins (Q7-Q12 only project the same matches)
    variants = {}
    if spec.order == "temporal" and not q.projected:
        variants["esper SEQ"] = QUERY_DIR / f"{q.name}_seq.epl"
    return Workload(epl_variants=variants,family=family, name=label, query=q.name, order=spec.order, n=spec.n,
                    patterns=[QUERY_DIR / f"{q.name}.pattern"], epl=QUERY_DIR / f"{q.name}.epl",
                    make_input=make, expected=lambda recs, q=q: thesis.expected_count(q, recs),
                    seq_patterns=seq, params=params, esper_time_scale=1.0,
                    note="projection: one composite event per tuple of input events" if q.projected else "")


def thesis_workloads(profile: str, data_dir: Path, only: set[str] | None, sizes: list[int] | None) -> list[Workload]:
    out = []
    for q in thesis.QUERIES.values():
        if only is not None and q.name not in only:
            continue
        ns = sizes or UNIFORM_SIZES[profile][SHAPE[q.name]]
        for order in ("random", "temporal"):
            for n in ns:
                spec = thesis.StreamSpec(q.rels, n, order)
                out.append(_thesis_workload(q, spec, data_dir, "thesis", f"{q.name} {order} N={n}"))
        if sizes is None and q.name in THESIS_SIZE_QUERIES[profile]:
            n, kw = THESIS_SIZE[q.name]
            spec = thesis.StreamSpec(q.rels, n, "random", **kw)
            knob = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in kw.items()) or "uniform"
            w = _thesis_workload(q, spec, data_dir, "thesis", f"{q.name} random N={n} ({knob})")
            w.note = (w.note + "; " if w.note else "") + f"thesis stream size, selective: {knob}"
            out.append(w)
    return out


def sweep_workloads(profile: str, data_dir: Path) -> list[Workload]:
    q = thesis.QUERIES["q1"]
    out = []
    for x in SWEEP[profile]:
        spec = thesis.StreamSpec("RS", SWEEP_N, "random", x=x)
        w = _thesis_workload(q, spec, data_dir, "sweep", f"sweep q1 N={SWEEP_N} x={x:g}")
        w.note = f"a fraction x of R joins: output ~ x/2 of the Cartesian product ({x / 2:.4g})"
        out.append(w)
    q4 = thesis.QUERIES["q4"]
    for x in SWEEP3[profile]:
        spec = thesis.StreamSpec("RST", SWEEP3_N, "random", x=x)
        w = _thesis_workload(q4, spec, data_dir, "sweep", f"sweep q4 N={SWEEP3_N} x={x:g}")
        w.note = f"a fraction x of R and of T joins: output ~ x^2/6 of the Cartesian product ({x * x / 6:.4g})"
        out.append(w)
    return out


EPL_SCHEMAS = {
    "cards": "@public @buseventtype create map schema Txn(card string, amount double, merchant string, ts long);\n",
    "logins": "@public @buseventtype create map schema Login(user string, ip string, country string, "
              "success boolean, ts long);\n",
    "quotes": "@public @buseventtype create map schema Quote(symbol string, price double, ts long);\n",
    "sensors": "@public @buseventtype create map schema Reading(sensor string, value double, ts long);\n",
}

# EPL versions of patterns/*.pattern. Skip-till-any-match: `every` on each element, so each earlier
# element starts its own sub-pattern instance. WITHIN w (inclusive, docs/language.md section 3) is
# timer:within(w + 1 ms): Esper's timer fires at exactly start + w, before an event of that time.
CEP_EPL = {
    "card_testing": ("cards", """@name('card_testing') select s1.card as card, s1.ts as first_ts, big.amount as amount
from pattern [every s1=Txn(amount < 100) -> (every s2=Txn(card = s1.card, amount < 100)
  -> every big=Txn(card = s1.card, amount > 400)) where timer:within(3600001 milliseconds)];
"""),
    "failed_logins": ("logins", """@name('failed_logins_then_success') select ok.user as user, ok.ip as ip,
  f1.ts as first_failure_ts, ok.ts as success_ts
from pattern [every f1=Login(success = false) -> (every f2=Login(user = f1.user, success = false)
  -> every f3=Login(user = f1.user, success = false) -> every ok=Login(user = f1.user, success = true))
  where timer:within(600001 milliseconds)];
"""),
    "impossible_travel": ("logins", """@name('impossible_travel') select a.user as user, a.country as from_country,
  b.country as to_country, b.ts - a.ts as seconds_apart
from pattern [every a=Login -> (every b=Login(user = a.user, country != a.country))
  where timer:within(3600001 milliseconds)];
"""),
    "rising_price": ("quotes", """@name('rising_price') select a.symbol as symbol, a.price as from_price,
  c.price as to_price, a.ts as from_ts, c.ts as to_ts
from pattern [every a=Quote -> (every b=Quote(symbol = a.symbol, price > a.price)
  -> every c=Quote(symbol = a.symbol, price > b.price, price >= a.price * 1.05))
  where timer:within(300001 milliseconds)];
"""),
    "sensor_drift": ("sensors", """@name('sensor_drift') select ok.sensor as sensor, ok.value as last_normal,
  out.value as value, out.ts as ts
from pattern [every ok=Reading(value >= 10, value <= 30) -> (every up=Reading(sensor = ok.sensor, value > ok.value)
  -> every out=Reading(sensor = ok.sensor, value > up.value, value > 30))
  where timer:within(3600001 milliseconds)];
"""),
}
# A second Esper formulation where one exists that Esper runs faster: a unidirectional join of time
# windows, triggered by the large purchase, with the same conditions (same matches, same count).
CEP_EPL_JOIN = {
    "card_testing": ("cards", """@name('card_testing') select s1.card as card, s1.ts as first_ts, big.amount as amount
from Txn(amount > 400) as big unidirectional, Txn(amount < 100)#time(3601 sec) as s1,
  Txn(amount < 100)#time(3601 sec) as s2
where s1.card = big.card and s2.card = big.card and s1.ts < s2.ts and big.ts - s1.ts <= 3600;
"""),
}
CEP_ORACLE = {"card_testing": streams.card_testing_count, "failed_logins": streams.failed_logins_count,
              "impossible_travel": streams.impossible_travel_count,
              "rising_price": streams.rising_price_count, "sensor_drift": streams.sensor_drift_count}
# where the bench's form differs from the shipped pattern (its oracle and EPL count that form)
CEP_PATTERN = {"failed_logins": QUERY_DIR / "failed_logins_seq4.pattern"}
CEP_WINDOW = {"card_testing": 3600, "failed_logins": 600, "impossible_travel": 3600, "rising_price": 300,
              "sensor_drift": 3600}
CEP_NOTE = {
    "card_testing": "SEQ of 3 with filters, PARTITION BY card, WITHIN 1 hour",
    "failed_logins": "SEQ of 4 (3 failures then a success), PARTITION BY user, WITHIN 10 min",
    "impossible_travel": "SEQ of 2 with a cross-event !=, PARTITION BY user, WITHIN 1 hour",
    "rising_price": "SEQ of 3 with cross-event inequalities and a 5% rise, PARTITION BY symbol, WITHIN 5 min",
    "sensor_drift": "SEQ of 3 with a band filter and rising values, PARTITION BY sensor, WITHIN 1 hour",
}
# (pattern, events, keys) per profile; card testing at 10^6 events over 10^4 cards is the target run
CEP_SIZES = {
    "quick": [("card_testing", 50_000, 500), ("failed_logins", 20_000, 500),
              ("impossible_travel", 20_000, 2_000), ("rising_price", 20_000, 100), ("sensor_drift", 20_000, 200)],
    "default": [("card_testing", 200_000, 2_000), ("failed_logins", 50_000, 1_000),
                ("impossible_travel", 50_000, 5_000), ("rising_price", 50_000, 200),
                ("sensor_drift", 50_000, 500)],
    "full": [("card_testing", 1_000_000, 10_000), ("failed_logins", 1_000_000, 10_000),
             ("impossible_travel", 1_000_000, 100_000), ("rising_price", 1_000_000, 2_000),
             ("sensor_drift", 1_000_000, 5_000)],
}
# the target run of the issue: card testing, 10^6 events over 10^4 cards (`--workloads card_target`)
CARD_TARGET = ("card_testing", 1_000_000, 10_000)


def cep_workloads(profile: str, data_dir: Path, only: set[str] | None = None,
                  target: bool = False) -> list[Workload]:
    CEP_EPL_DIR.mkdir(exist_ok=True)
    out = []
    runs = [CARD_TARGET] if target else CEP_SIZES[profile]
    for name, n, keys in runs:
        if only is not None and name not in only:
            continue
        kind, stmt = CEP_EPL[name]
        epl = CEP_EPL_DIR / f"{name}.epl"
        text = EPL_SCHEMAS[kind] + stmt
        if not epl.exists() or epl.read_text() != text:
            epl.write_text(text)
        variants = {}
        if name in CEP_EPL_JOIN:
            jkind, jstmt = CEP_EPL_JOIN[name]
            jpath = CEP_EPL_DIR / f"{name}_join.epl"
            jtext = EPL_SCHEMAS[jkind] + jstmt
            if not jpath.exists() or jpath.read_text() != jtext:
                jpath.write_text(jtext)
            variants["esper join"] = jpath
        spec = streams.CepStream(kind, n, keys)
        out.append(Workload(epl_variants=variants,
            family="cep", name=f"{name} N={n} keys={keys}", query=name, order="time", n=n,
            patterns=[CEP_PATTERN.get(name, PATTERNS_DIR / f"{name}.pattern")], epl=epl,
            make_input=lambda spec=spec: streams.write_stream(spec, data_dir),
            expected=CEP_ORACLE[name], cli=(name == "card_testing"), window=CEP_WINDOW[name],
            note=CEP_NOTE[name] + "; Esper: `every` on each element"))
    return out
