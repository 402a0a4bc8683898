#!/bin/bash
# instruction counts, base vs branch (lines mode), fixed hash seed
D=/tmp/thesis_start/data
for q in "$@"; do
  set -- $q
  for side in base branch; do
    if [ $side = base ]; then co=/tmp/base-s4; fl="--gc"; else co=/work/wt-output; fl="--gc --lines"; fi
    r=$(PYTHONHASHSEED=0 PYTHONPATH=$co valgrind --tool=callgrind --callgrind-out-file=/dev/null --toggle-collect=starmap_next /work/wt-output/.venv/bin/python $co/bench/loop_ir.py /work/wt-output/bench/queries/$1.pattern $2 $fl 2>&1 | grep -E "Collected|composite" | tr '\n' ' ')
    echo "$1 $(basename $2) $side $r"
  done
done
