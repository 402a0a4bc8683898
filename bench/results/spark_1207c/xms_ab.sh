#!/bin/bash
# executor heap: cep's options (A) against the same plus -Xms1024m (C), local-cluster, 10 files, alternating
root=${ROOT:-$(cd "$(dirname "$0")/../../.." && pwd)}; out=${OUT:-/tmp/xms}; mkdir -p "$out"
LC=$(cd "$root" && python -c "from cep.connectors.spark_session import LOG_OPTION; print(LOG_OPTION)")
base="-XX:TieredStopAtLevel=1 -XX:+UseParallelGC $LC"
for pair in "$@"; do
  if [ $((pair % 2)) = 1 ]; then order="A C"; else order="C A"; fi
  for v in $order; do
    if [ $v = C ]; then opt="$base -Xms1024m"; else opt="$base"; fi
    (cd "$root" && python -m bench.spark_profile --master 'local-cluster[2,1,1024]' --events 1000000 --files 10 \
        --conf "spark.executor.extraJavaOptions=$opt" > "$out/lc-kg$v-$pair.json" 2>"$out/err-$v-$pair.txt")
    echo "$(date -u +%H:%M:%S) $v $pair" >> "$out/progress.txt"
  done
done
