#!/bin/bash
# glibc malloc without mmap'd chunks or trimming (C) against defaults (A), executors and their Python workers
out=/tmp/me/malloc; cd /work/main
for pair in "$@"; do
  if [ $((pair % 2)) = 1 ]; then order="A C"; else order="C A"; fi
  for v in $order; do
    if [ $v = C ]; then conf=(--conf spark.executorEnv.MALLOC_MMAP_THRESHOLD_=268435456 --conf spark.executorEnv.MALLOC_TRIM_THRESHOLD_=1073741824 --conf spark.executorEnv.MALLOC_TOP_PAD_=67108864); else conf=(); fi
    python -m bench.spark_profile --master 'local-cluster[2,1,1024]' --events 1000000 --files 10 "${conf[@]}" > "$out/lc-kg$v-$pair.json" 2>"$out/err-$v-$pair.txt"
    echo "$(date -u +%H:%M:%S) $v $pair $(uptime | sed 's/.*average: //')" >> "$out/progress.txt"
  done
done
