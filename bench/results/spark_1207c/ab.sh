#!/bin/bash
# key groups A/B on a master: ORDER of kgs per pair
master=$1; shift
for pair in "$@"; do
  if [ $((pair % 2)) = 1 ]; then order="16 2"; else order="2 16"; fi
  for kg in $order; do
    (cd /work/main && python -m bench.spark_profile --master "$master" --events 500000 --files 5 --partitions 2 --key-groups $kg > /tmp/kg/$(echo $master | tr -d '[],')-kg$kg-$pair.json 2>/tmp/kg/err-$kg-$pair.txt)
    echo "$(date -u +%H:%M:%S) $master kg$kg $pair" >> /tmp/kg/progress.txt
  done
done
