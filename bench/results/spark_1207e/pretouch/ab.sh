#!/bin/bash
# The executors' heap pre-touched at start (C: -XX:+AlwaysPreTouch) against cep's executor options (A), both given
# whole as spark.executor.extraJavaOptions; local-cluster, 10 files, alternating: bash ab.sh 1 2 3 4
out=${OUT:-/tmp/me/pretouch}; cd /work/main || exit 1
base="-XX:TieredStopAtLevel=1 -XX:+UseParallelGC -Xms1024m -Dlog4j2.configurationFile=/work/main/connectors/log4j2.properties"
for pair in "$@"; do
  if [ $((pair % 2)) = 1 ]; then order="A C"; else order="C A"; fi
  for v in $order; do
    if [ $v = C ]; then opts="$base -XX:+AlwaysPreTouch"; else opts="$base"; fi
    python -m bench.spark_profile --master 'local-cluster[2,1,1024]' --events 1000000 --files 10 \
      --conf "spark.executor.extraJavaOptions=$opts" > "$out/lc-kg$v-$pair.json" 2>"$out/err-$v-$pair.txt"
    echo "$(date -u +%H:%M:%S) $v $pair $(uptime | sed 's/.*average: //')" >> "$out/progress.txt"
  done
done
