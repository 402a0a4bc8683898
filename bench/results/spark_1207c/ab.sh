#!/bin/bash
# Key groups 16 against 2 at 2 state partitions on MASTER, alternating per pair (odd pairs 16 first):
#   bash bench/results/spark_1207c/ab.sh 'local-cluster[2,1,1024]' 1 2 3 4 5 6   (JSON into $OUT, default /tmp/kg)
root=$(cd "$(dirname "$0")/../../.." && pwd); out=${OUT:-/tmp/kg}; mkdir -p "$out"
master=$1; shift
for pair in "$@"; do
  if [ $((pair % 2)) = 1 ]; then order="16 2"; else order="2 16"; fi
  for kg in $order; do
    (cd "$root" && python -m bench.spark_profile --master "$master" --events 500000 --files 5 --partitions 2 \
        --key-groups $kg > "$out/$(echo $master | tr -d '[],')-kg$kg-$pair.json" 2>"$out/err-$kg-$pair.txt")
    echo "$(date -u +%H:%M:%S) $master kg$kg $pair" >> "$out/progress.txt"
  done
done
