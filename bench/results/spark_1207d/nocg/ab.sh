#!/bin/bash
# factoryMode NO_CODEGEN (C) against cep's defaults (A), local-cluster, 10 files, alternating
out=/tmp/me/nocg; cd /work/main
for pair in "$@"; do
  if [ $((pair % 2)) = 1 ]; then order="A C"; else order="C A"; fi
  for v in $order; do
    if [ $v = C ]; then conf=(--conf spark.sql.codegen.factoryMode=NO_CODEGEN); else conf=(); fi
    python -m bench.spark_profile --master 'local-cluster[2,1,1024]' --events 1000000 --files 10 "${conf[@]}" > "$out/lc-kg$v-$pair.json" 2>"$out/err-$v-$pair.txt"
    echo "$(date -u +%H:%M:%S) $v $pair $(uptime | sed 's/.*average: //')" >> "$out/progress.txt"
  done
done
