"""CPU per 10^5 events: one engine vs 64 bucket engines (push_batch, lines mode, own watermark), and one engine's
fused push_records (cep run's path). Alternating rounds, process_time."""
import sys, time, zlib, gc, orjson, statistics
from bench.spark_bench import PATTERN, make_events
from cep.io.readers import make_decoder
from cep.connectors.spark_spec import pattern_spec

N = 100000
evs_all = make_events(4 * N)
lines = [orjson.dumps(e) for e in evs_all]
spec = pattern_spec(PATTERN, lateness=120)
dec = make_decoder('type', 'ts', 's', 'op')
batches = [[dec(str(lo + i), l) for i, l in enumerate(lines[lo:lo + N])] for lo in range(0, 4 * N, N)]
recs = [[orjson.loads(l) for l in lines[lo:lo + N]] for lo in range(0, 4 * N, N)]
bucket = [[zlib.crc32(orjson.dumps(e.fields['card'])) % 64 for e in b] for b in batches]

def one():
    eng = spec.new_engine(0, lines=True)
    ts = []
    for b in batches:
        t0 = time.process_time(); n = len(eng.push_batch(b, True)); ts.append(time.process_time() - t0)
    return ts[1:], n

def many(nb=64):
    engs = [spec.new_engine(0, lines=True) for _ in range(nb)]
    ts = []
    for b, bk in zip(batches, bucket):
        t0 = time.process_time()
        parts = [[] for _ in range(nb)]
        for e, k in zip(b, bk):
            parts[k % nb].append(e)
        n = 0
        for eng, p in zip(engs, parts):
            n += len(eng.push_batch(p, True))
        ts.append(time.process_time() - t0)
    return ts[1:], n

def fused():
    eng = spec.new_engine(0, lines=True)
    ts = []
    first = 1
    for r in recs:
        t0 = time.process_time()
        took, outs = eng.push_records(r, first)
        assert took == len(r), took
        first += len(r)
        ts.append(time.process_time() - t0)
    return ts[1:], len(outs)

from cep.gc_policy import stream_gc
N_OUT = {}
res = {"one": [], "64": [], "fused": []}
for rnd in range(int(sys.argv[1]) if len(sys.argv) > 1 else 5):
    for name, fn in (("one", one), ("64", many), ("fused", fused)) if rnd % 2 == 0 else (("fused", fused), ("64", many), ("one", one)):
        with stream_gc():
            ts, n = fn()
        res[name] += ts; N_OUT[name] = n
for k, v in res.items():
    print(k, "n", N_OUT.get(k), "median", round(statistics.median(v), 3), "min", round(min(v), 3), len(v))
