#!/bin/bash
# Branch pretouch (C: cep's executor options with -XX:+AlwaysPreTouch) against main (A): the ratio on
# local-cluster, 20 micro-batches of 10^5 events, a cep run slot before and after each Spark run, alternating
# checkouts: bash ratio_ab.sh 1 2 3
out=/work/main/bench/results/spark_1207e/pretouch
for pair in "$@"; do
  if [ $((pair % 2)) = 1 ]; then order="A C"; else order="C A"; fi
  for v in $order; do
    if [ $v = C ]; then cd /work/wt-pretouch || exit 1; py=.venv/bin/python; else cd /work/main || exit 1; py=python; fi
    $py -m bench.spark_bench --events 2000000 --files 20 --files-per-batch 1 --cores 'local-cluster[2,1,1024]' \
      --partitions 2 --no-kafka --repeat 2 --rounds 1 > "$out/ratio_$v$pair.log" 2>&1
    echo "$(date -u +%H:%M:%S) $v $pair $(uptime | sed 's/.*average: //')" >> "$out/ratio_progress.txt"
  done
done
