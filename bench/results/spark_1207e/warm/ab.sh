#!/bin/bash
# The steady state after 1 and after 10 warm-up micro-batches, alternating (local-cluster, 10 timed micro-batches
# of 10^5 events, a cep run slot before and after each Spark run): bash ab.sh 1 2 3 4
cd "$(dirname "$0")/../../../.." || exit 1
for i in "$@"; do
  for w in 1 10; do
    python -m bench.spark_bench --events 1000000 --files 10 --files-per-batch 1 \
      --cores 'local-cluster[2,1,1024]' --partitions 2 --no-kafka --repeat 2 --rounds 1 --warm-batches "$w" \
      > "bench/results/spark_1207e/warm/w${w}_$i.log" 2>&1
  done
done
