"""JVM samples by phase: each sample goes to the first phase (in this order) named anywhere on its stack.

    python phase_all.py STACKS        (collapse.py's output)
"""

import collections
import re
import sys

PHASES = [
    ("Hadoop Configuration serialized/read (SerializableConfiguration)", r"SerializableConfiguration"),
    ("closure cleaner (ClosureCleaner: class files parsed, closures serialized)", r"ClosureCleaner"),
    ("observe(): AggregatingAccumulator (per-task projection, merge, value)", r"AggregatingAccumulator"),
    ("per-task code generation (projections, predicates, state serializers)",
     r"Generate(Mutable|Unsafe|Safe)Projection|GeneratePredicate|CodeGenerator\.generate|GenerateOrdering"),
    ("optimizer", r"Optimizer|optimizedPlan"),
    ("analyzer", r"Analyzer|analyzed|assertAnalyzed"),
    ("physical planning / preparation", r"SparkPlanner|QueryPlanner|createSparkPlan|prepareForExecution|executedPlan"),
    ("Python runner, Arrow to/from Python", r"PythonRunner|PythonArrow|ArrowWriter|ArrowColumnVector|arrow"),
    ("state store (RocksDB, state rows)", r"StateStore|RocksDB|StateManager"),
    ("shuffle", r"Shuffle"),
    ("checkpoint logs", r"HDFSMetadataLog|CheckpointFileManager"),
    ("DAG scheduler", r"DAGScheduler"),
]


def main() -> None:
    counts: collections.Counter = collections.Counter()
    total = 0
    for line in open(sys.argv[1]):
        stack, n = line.rsplit(" ", 1)
        frames, k = stack.split(";"), int(n)
        total += k
        name = next((name for name, pat in PHASES if any(re.search(pat, fr) for fr in frames)), "other")
        counts[name] += k
    print("samples", total)
    for name, k in counts.most_common():
        print(f"| {name} | {k} | {100 * k / total:.1f} % |")


if __name__ == "__main__":
    main()
