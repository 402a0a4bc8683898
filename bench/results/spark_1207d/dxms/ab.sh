#!/bin/bash
# local[2]: cep's driver options (A) against the same plus -Xms2048m (C: the local session's spark.driver.memory), alternating
out=/tmp/me/dxms; cd /work/main
for pair in "$@"; do
  if [ $((pair % 2)) = 1 ]; then order="A C"; else order="C A"; fi
  for v in $order; do
    if [ $v = C ]; then opt="-XX:TieredStopAtLevel=1 -XX:+UseParallelGC -Dlog4j2.configurationFile=/work/main/connectors/log4j2.properties -Xms2048m"; else opt="-XX:TieredStopAtLevel=1 -XX:+UseParallelGC -Dlog4j2.configurationFile=/work/main/connectors/log4j2.properties"; fi
    python -m bench.spark_profile --master 'local[2]' --events 1000000 --files 10 --conf "spark.driver.extraJavaOptions=$opt" > "$out/l2-kg$v-$pair.json" 2>"$out/err-$v-$pair.txt"
    echo "$(date -u +%H:%M:%S) $v $pair $(uptime | sed 's/.*average: //')" >> "$out/progress.txt"
  done
done
