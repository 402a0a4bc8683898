#!/bin/bash
# The daemon-gate A/B of bench/results/spark.md (2026-12-07b): this checkout (GATE, the branch) against BASE
# (main before it), alternating, 3 pairs per master, each run bench.worker_marks (its marks, then spark_profile's JSON):
#   GATE=/work/wt-gate BASE=/work/main bash ab.sh        -> MASTER-{gate,main}-PAIR.txt here; python show.py
out=$(cd "$(dirname "$0")" && pwd)
for i in 3 4 5; do
  for m in 'local[1]' 'local-cluster[2,1,1024]'; do
    t=$(echo "$m" | tr -d '[],-' | cut -c1-13)
    if [ $((i % 2)) = 1 ]; then order="gate main"; else order="main gate"; fi
    for side in $order; do
      if [ $side = gate ]; then d=$GATE; else d=$BASE; fi
      (cd "$d" && timeout 900 python3 -m bench.worker_marks -- --master "$m" --events 400000 --files 4 \
        --key-groups 16 > "$out/$t-$side-$i.txt" 2>&1)
      echo "$t $side $i load $(cut -d' ' -f1 /proc/loadavg)"
    done
  done
done
