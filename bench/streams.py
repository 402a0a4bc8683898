"""Realistic synthetic streams for the patterns in ``patterns/`` (cards, quotes, logins, sensors).

Why synthetic and how: there is no public card-transaction stream, so background traffic is drawn from
plausible distributions and the situations the patterns look for (card-testing bursts, failed-login
runs, ...) are injected at a known rate, so a run has a realistic mix of noise and matches. Every
stream has strictly increasing integer timestamps (one record per tick), so SEQ's strict time order and
Esper's arrival order coincide, and a file is a pure function of its parameters (seeded).
"""

from __future__ import annotations

import heapq
import random
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson

T0 = 1_700_000_000  # event time of the first record, in seconds


@dataclass(frozen=True)
class CepStream:
    """One generated stream: kind (generator name), size, number of keys, seed."""

    kind: str
    n: int
    keys: int
    seed: int = 11

    @property
    def filename(self) -> str:
        return f"{self.kind}_{self.n}_{self.keys}_s{self.seed}.jsonl"


def _merge(background: Callable[[random.Random, int], dict], inject_rate: float,
           burst: Callable[[random.Random, int], list[tuple[int, dict]]], n: int,
           rng: random.Random) -> Iterator[dict]:
    """One record per second: a due injected record if any, else background traffic.

    ``burst(rng, t)`` returns (offset in seconds, record) pairs scheduled after ``t``; a record whose
    slot is taken waits for the next free second, so a burst keeps its order.
    """
    pending: list[tuple[int, int, dict]] = []
    seq = 0
    for step in range(n):
        t = T0 + step
        if rng.random() < inject_rate:
            for off, rec in burst(rng, t):
                heapq.heappush(pending, (t + off, seq, rec))
                seq += 1
        if pending and pending[0][0] <= t:
            _, _, rec = heapq.heappop(pending)
        else:
            rec = background(rng, t)
        rec = dict(rec)
        rec["ts"] = t
        yield rec


# ---------------------------------------------------------------------------
# cards (card_testing.pattern): Txn(card, amount, merchant)


def _card(i: int) -> str:
    return f"4111-{i:06d}"


def _amount(rng: random.Random) -> float:
    # log-normal around 60 with a long tail: ~45% below 100, ~12% above 400
    return round(min(5000.0, rng.lognormvariate(4.2, 1.1)), 2)


def cards(spec: CepStream) -> Iterator[dict]:
    rng = random.Random(f"cards:{spec.seed}:{spec.n}:{spec.keys}")

    def background(rng: random.Random, t: int) -> dict:
        return {"type": "Txn", "card": _card(rng.randrange(spec.keys)), "amount": _amount(rng),
                "merchant": f"m{rng.randrange(5000)}"}

    def burst(rng: random.Random, t: int) -> list[tuple[int, dict]]:
        # card testing: 2-6 small charges a few minutes apart, then a large one
        card = _card(rng.randrange(spec.keys))
        off, out = 0, []
        for _ in range(rng.randint(2, 6)):
            off += rng.randint(5, 600)
            out.append((off, {"type": "Txn", "card": card, "amount": round(rng.uniform(0.5, 5), 2),
                              "merchant": f"m{rng.randrange(5000)}"}))
        off += rng.randint(5, 1800)
        out.append((off, {"type": "Txn", "card": card, "amount": round(rng.uniform(450, 3000), 2),
                          "merchant": f"m{rng.randrange(5000)}"}))
        return out

    yield from _merge(background, 0.002, burst, spec.n, rng)


def card_testing_count(records: list[dict], small: float = 100, big: float = 400,
                       window: int = 3600) -> int:
    """Matches of SEQ(s1, s2, big) same card, s1/s2 < small, big > big, big.ts - s1.ts <= window."""
    smalls: dict = defaultdict(list)
    total = 0
    for r in records:
        if r.get("type") != "Txn":
            continue
        amt = r["amount"]
        card = r["card"]
        if amt < small:
            smalls[card].append(r["ts"])
        elif amt > big:
            lst = smalls.get(card)
            if not lst:
                continue
            lo = r["ts"] - window
            while lst and lst[0] < lo:
                lst.pop(0)
            m = len(lst)
            total += m * (m - 1) // 2
    return total


# ---------------------------------------------------------------------------
# logins (failed_logins.pattern, impossible_travel.pattern): Login(user, ip, country, success)

_COUNTRIES = ("US", "DE", "FR", "GB", "BR", "IN", "JP", "NG", "RU", "CN")


def logins(spec: CepStream) -> Iterator[dict]:
    rng = random.Random(f"logins:{spec.seed}:{spec.n}:{spec.keys}")

    def home(u: int) -> str:
        return _COUNTRIES[u % 4]  # most users live in 4 countries

    def background(rng: random.Random, t: int) -> dict:
        u = rng.randrange(spec.keys)
        country = home(u) if rng.random() < 0.98 else rng.choice(_COUNTRIES)
        return {"type": "Login", "user": f"u{u}", "ip": f"10.{u % 256}.{rng.randrange(256)}.{rng.randrange(256)}",
                "country": country, "success": rng.random() < 0.95}

    def burst(rng: random.Random, t: int) -> list[tuple[int, dict]]:
        # password guessing: 3-8 failures from one foreign ip, then a success
        u = rng.randrange(spec.keys)
        ip = f"203.0.{rng.randrange(256)}.{rng.randrange(256)}"
        country = rng.choice(_COUNTRIES)
        off, out = 0, []
        for _ in range(rng.randint(3, 8)):
            off += rng.randint(2, 60)
            out.append((off, {"type": "Login", "user": f"u{u}", "ip": ip, "country": country, "success": False}))
        off += rng.randint(2, 120)
        out.append((off, {"type": "Login", "user": f"u{u}", "ip": ip, "country": country, "success": True}))
        return out

    yield from _merge(background, 0.003, burst, spec.n, rng)


# ---------------------------------------------------------------------------
# quotes (rising_price.pattern): Quote(symbol, price)


def quotes(spec: CepStream) -> Iterator[dict]:
    rng = random.Random(f"quotes:{spec.seed}:{spec.n}:{spec.keys}")
    price = [round(rng.uniform(10, 500), 2) for _ in range(spec.keys)]

    def background(rng: random.Random, t: int) -> dict:
        s = rng.randrange(spec.keys)
        price[s] = max(0.01, round(price[s] * rng.lognormvariate(0, 0.004), 2))
        return {"type": "Quote", "symbol": f"SYM{s}", "price": price[s]}

    def burst(rng: random.Random, t: int) -> list[tuple[int, dict]]:
        # a rally: 3-7 quotes, each 1-3% above the last, seconds apart
        s = rng.randrange(spec.keys)
        p = price[s]
        off, out = 0, []
        for _ in range(rng.randint(3, 7)):
            off += rng.randint(3, 40)
            p = round(p * rng.uniform(1.01, 1.03), 2)
            out.append((off, {"type": "Quote", "symbol": f"SYM{s}", "price": p}))
        return out

    yield from _merge(background, 0.002, burst, spec.n, rng)


# ---------------------------------------------------------------------------
# sensors (sensor_drift.pattern): Reading(sensor, value)


def sensors(spec: CepStream) -> Iterator[dict]:
    rng = random.Random(f"sensors:{spec.seed}:{spec.n}:{spec.keys}")

    def background(rng: random.Random, t: int) -> dict:
        s = rng.randrange(spec.keys)
        return {"type": "Reading", "sensor": f"s{s}", "value": round(rng.gauss(20 + s % 5, 3), 2)}

    def burst(rng: random.Random, t: int) -> list[tuple[int, dict]]:
        # drift: readings climbing from inside the band to above 30 over a few minutes
        s = rng.randrange(spec.keys)
        v = rng.uniform(24, 29)
        off, out = 0, []
        for _ in range(rng.randint(3, 6)):
            off += rng.randint(10, 300)
            out.append((off, {"type": "Reading", "sensor": f"s{s}", "value": round(v, 2)}))
            v += rng.uniform(1, 4)
        return out

    yield from _merge(background, 0.002, burst, spec.n, rng)


GENERATORS: dict[str, Callable[[CepStream], Iterator[dict]]] = {
    "cards": cards, "logins": logins, "quotes": quotes, "sensors": sensors}


def seq_count(records: list[dict], type_: str, key: str, window: float, conds: list) -> int:
    """Brute-force oracle for SEQ(type x1, ..., xk) PARTITION BY key WITHIN window (inclusive).

    ``conds[j](chosen, e)``: whether event ``e`` may be element j given the earlier elements ``chosen``.
    Enumerates every tuple depth-first within each partition's window; for checking counts only.
    """
    parts: dict = defaultdict(list)
    for r in records:
        if r.get("type") == type_:
            parts[r.get(key)].append(r)
    k = len(conds)
    total = 0

    def extend(evs: list[dict], start: int, chosen: list[dict], t0: float) -> int:
        if len(chosen) == k:
            return 1
        n = 0
        j = len(chosen)
        for idx in range(start, len(evs)):
            e = evs[idx]
            if e["ts"] - t0 > window:
                break
            if e["ts"] > chosen[-1]["ts"] and conds[j](chosen, e):
                chosen.append(e)
                n += extend(evs, idx + 1, chosen, t0)
                chosen.pop()
        return n

    for evs in parts.values():
        for i, e in enumerate(evs):
            if conds[0]([], e):
                total += extend(evs, i + 1, [e], e["ts"])
    return total


def failed_logins_count(records: list[dict]) -> int:
    def f(c: list, e: dict) -> bool:
        return e["success"] is False

    return seq_count(records, "Login", "user", 600, [f, f, f, lambda c, e: e["success"] is True])


def impossible_travel_count(records: list[dict]) -> int:
    return seq_count(records, "Login", "user", 3600,
                     [lambda c, e: True, lambda c, e: e["country"] != c[0]["country"]])


def rising_price_count(records: list[dict]) -> int:
    return seq_count(records, "Quote", "symbol", 300, [
        lambda c, e: True, lambda c, e: e["price"] > c[0]["price"],
        lambda c, e: e["price"] > c[1]["price"] and e["price"] >= c[0]["price"] * 1.05])


def sensor_drift_count(records: list[dict]) -> int:
    return seq_count(records, "Reading", "sensor", 3600, [
        lambda c, e: 10 <= e["value"] <= 30, lambda c, e: e["value"] > c[0]["value"],
        lambda c, e: e["value"] > c[1]["value"] and e["value"] > 30])


def write_stream(spec: CepStream, directory: Path) -> Path:
    """Write the stream as JSON lines (once; reused if it exists)."""
    path = directory / spec.filename
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        dumps = orjson.dumps
        opt = orjson.OPT_APPEND_NEWLINE
        with open(tmp, "wb") as f:
            buf = []
            for rec in GENERATORS[spec.kind](spec):
                buf.append(dumps(rec, option=opt))
                if len(buf) >= 10000:
                    f.write(b"".join(buf))
                    buf.clear()
            f.write(b"".join(buf))
        tmp.rename(path)
    return path


def read_records(path: Path) -> list[dict]:
    with open(path, "rb") as f:
        return [orjson.loads(line) for line in f if line.strip()]


def max_window_occupancy(records: list[dict], window: float) -> int:
    """The most records whose times lie in one window ``[t - window, t]`` (what a window must hold)."""
    ts = [r["ts"] for r in records]
    best = 0
    j = 0
    for i, t in enumerate(ts):
        while ts[j] < t - window:
            j += 1
        best = max(best, i - j + 1)
    return best
