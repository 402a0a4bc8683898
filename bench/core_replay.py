"""``python -m bench.core_replay PATTERN DATA [--limit N] [--repeat R] [--checkout DIR]``: CPU time of the
IEDYN core alone, per event.

Why: the `cep run` loop's time mixes reading, decoding, the engine's bookkeeping, the core's update
paths and enumeration, and output; on a loaded 2-core machine its noise hides a change to one of them.
This runs the engine over the stream once, recording every call it makes into the pattern's
``PatternRuntime`` (inserts, update paths, batch expiry; an insert's new matches are enumerated
in the replay as the engine does), then replays
exactly those calls against a fresh runtime ``--repeat`` times and reports the best CPU time
(``time.process_time``) per event: the update paths, indexes, fan-outs and enumeration, nothing else.
``--checkout DIR`` imports cep from another checkout (a base worktree) for an A/B in one command line.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time


def record(runtime_class) -> list[tuple]:
    """Wrap the entry points of every ``PatternRuntime`` built from now on (before the engine reads
    them, whatever it builds from them); the returned list fills as the engine runs."""
    log: list[tuple] = []
    init = runtime_class.__init__

    def logged_init(rt, *a, **k):
        init(rt, *a, **k)
        for ai, insert in list(rt.inserter.items()):
            def logged_insert(e, s, same, ai=ai, insert=insert):
                log.append((0, ai, e, s, same))
                return insert(e, s, same)
            rt.inserter[ai] = logged_insert
        for ai, prop in list(rt._prop_of_atom.items()):
            def logged_prop(t, c, ai=ai, prop=prop):
                log.append((1, ai, t, c, None))
                return prop(t, c)
            rt._prop_of_atom[ai] = logged_prop
        expire = rt.expire

        def logged_expire(ai, tuples):
            log.append((2, ai, list(tuples), None, None))
            return expire(ai, tuples)
        rt.expire = logged_expire
    runtime_class.__init__ = logged_init
    return log


def replay(runtime, log: list[tuple]) -> tuple[float, int]:
    """CPU seconds of the logged calls against ``runtime``, and the matches enumerated."""
    inserter, props, expire, changes = runtime.inserter, runtime._prop_of_atom, runtime.expire, runtime.changes
    matches = 0
    gc.collect()
    t0 = time.process_time()
    for kind, ai, a, b, c in log:
        if kind == 0:
            r = inserter[ai](a, b, c)
            if r is not None and r[1] is not None:
                for _m in changes(r[1]):
                    matches += 1
        elif kind == 1:  # an update path called directly: an insert (c > 0) enumerates its matches
            r = props[ai](a, b)
            if b > 0 and r is not None:
                for _m in changes(r):
                    matches += 1
        else:
            expire(ai, a)
    return time.process_time() - t0, matches


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pattern")
    ap.add_argument("data")
    ap.add_argument("--limit", type=int, default=None, help="first N records")
    ap.add_argument("--repeat", type=int, default=3, help="replays (the best is reported)")
    ap.add_argument("--checkout", default=None, help="import cep from this checkout")
    args = ap.parse_args()
    if args.checkout:
        sys.path.insert(0, args.checkout)
    from cep.io.readers import make_decoder, open_source
    from cep.lang.compiler import compile_files
    from cep.runtime.engine import Engine
    from cep.runtime.iedyn import PatternRuntime

    decode = make_decoder()
    events = []
    for pos, raw in open_source(args.data).records():
        events.append(decode(pos, raw))
        if args.limit is not None and len(events) >= args.limit:
            break
    patterns = compile_files([args.pattern])
    if len(patterns) != 1:
        raise SystemExit("core_replay: one pattern per file")
    fresh = PatternRuntime.__init__
    log = record(PatternRuntime)
    engine = Engine(patterns)
    PatternRuntime.__init__ = fresh
    for i in range(0, len(events), 512):
        engine.push_batch(events[i:i + 512])
    best = None
    for _ in range(args.repeat):
        took, matches = replay(Engine(patterns).runtimes[0], log)
        best = took if best is None else min(best, took)
    import cep
    print(f"core {best / len(events) * 1e6:.2f} us/event  matches {matches}  runtime calls {len(log)}  ({cep.__file__})")


if __name__ == "__main__":
    main()
