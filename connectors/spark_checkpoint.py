"""A ``cep spark`` checkpoint's fit to the query: refused at start in one line when it was written for other
patterns or options, its key-group layout and state partitions kept when not given.

Why a module of its own: Spark checks a resumed query's state only inside a micro-batch (a failed task, a long
trace); cep checks what it wrote beside Spark's files (``CHECKPOINT_META``) before the query starts.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from cep.connectors.spark_spec import PatternSpec, SparkPathError


def checkpoint_state_partitions(checkpoint: str) -> int | None:
    """The state-partition count a checkpoint was created with (fixed for its life), or None if new."""
    import json

    d = Path(checkpoint) / "offsets"
    if not d.is_dir():
        return None
    files = sorted((p for p in d.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    if not files:
        return None
    lines = files[-1].read_text().splitlines()
    for line in lines[1:2]:
        try:
            conf = json.loads(line).get("conf", {})
        except ValueError:
            return None
        v = conf.get("spark.sql.shuffle.partitions")
        return int(v) if v is not None else None
    return None


CHECKPOINT_META = "cep-spark.json"  # beside Spark's own files in the checkpoint directory


def checkpoint_fingerprint(spec: PatternSpec) -> dict:
    """What a checkpoint's state depends on: the patterns (as printed), key groups and engines per key group,
    time unit and fields."""
    from cep.runtime.engine import pattern_signature

    return {"patterns": [pattern_signature(cp) for cp in spec.compile()], "key_groups": spec.key_groups,
            "group_engines": spec.group_engines, "placed_on": spec.placed_on, "time_unit": spec.time_unit,
            "type_field": spec.type_field, "time_field": spec.time_field, "op_field": spec.op_field,
            "lateness": spec.lateness}


LAYOUT_KEYS = ("key_groups", "group_engines")  # a checkpoint's state layout: its own on resume unless given


def check_checkpoint(checkpoint: str, spec: PatternSpec, state_partitions: int | None = None) -> PatternSpec:
    """Refuse a checkpoint written for other patterns or options (one line); record them in a new one.

    Why: the state store holds engine states of (pattern, key group) groups; other patterns or another key-group
    count would route records to the wrong states, and Spark would only fail deep inside a micro-batch.
    Returns the spec the query runs with. A resumed checkpoint: ``spec`` with the key-group layout
    (``LAYOUT_KEYS``) the caller did not choose (``spec.given``) and the key groups' placement taken from the
    checkpoint, as Flink keeps a savepoint's max parallelism: a checkpoint written with other defaults (64 key
    groups of one engine each; 16 key groups of 4 engines, not placed) resumes as it was written. A new
    checkpoint: with ``state_partitions`` (the query's ``spark.sql.shuffle.partitions``) its layout is chosen
    for them (``PatternSpec.placed``) and recorded; without, it is only checked (the call before Spark starts).
    """
    import json

    meta = Path(checkpoint) / CHECKPOINT_META
    if meta.is_file():
        try:
            have = json.loads(meta.read_text())
        except ValueError:
            raise SparkPathError(f"checkpoint {checkpoint}: {CHECKPOINT_META} is not readable") from None
        have.setdefault("group_engines", 1)  # written when a key group was one engine
        placed_on = have.get("placed_on")  # (absent: written before key groups were placed)
        spec = replace(spec, **{k: have[k] for k in LAYOUT_KEYS if k not in spec.given and type(have.get(k)) is int},
                       placed_on=placed_on if type(placed_on) is int else None)
        want = checkpoint_fingerprint(spec)
        diff = sorted(k for k in want if have.get(k) != want[k])
        if diff:
            what = ", ".join("pattern files" if k == "patterns" else f"--{k.replace('_', '-')}" for k in diff)
            raise SparkPathError(f"checkpoint {checkpoint} was written with other {what} (a resumed query needs "
                                 "the same patterns and options); use a new checkpoint directory")
        return spec
    if (Path(checkpoint) / "offsets").is_dir():
        raise SparkPathError(f"checkpoint {checkpoint} was not written by cep spark (no {CHECKPOINT_META}); "
                             "use a new checkpoint directory")
    if state_partitions is None:
        return spec
    spec = spec.placed(state_partitions)
    want = checkpoint_fingerprint(spec)
    meta.parent.mkdir(parents=True, exist_ok=True)
    tmp = meta.with_suffix(".tmp")
    tmp.write_text(json.dumps(want, indent=1))
    tmp.replace(meta)
    return spec
