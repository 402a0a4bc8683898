#!/bin/bash
# branch yarn (C: an empty yarn-default.xml on the JVMs' class path) against main (A), local-cluster, 10 files, alternating
out=/tmp/me/yarn2
for pair in "$@"; do
  if [ $((pair % 2)) = 1 ]; then order="A C"; else order="C A"; fi
  for v in $order; do
    if [ $v = C ]; then cd /work/wt-yarn; py=.venv/bin/python; else cd /work/main; py=python; fi
    $py -m bench.spark_profile --master "${MASTER:-local-cluster[2,1,1024]}" --events 1000000 --files 10 > "$out/${TAG:-lc}-kg$v-$pair.json" 2>"$out/err-$v-$pair.txt"
    echo "$(date -u +%H:%M:%S) $v $pair $(uptime | sed 's/.*average: //')" >> "$out/progress.txt"
  done
done
