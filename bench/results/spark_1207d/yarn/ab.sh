#!/bin/bash
# empty yarn-default.xml and mapred-default.xml ahead of Hadoop's on the JVMs' class path (C) against none (A)
out=/tmp/me/yarn; cd /work/main
CD=/root/.cache/cep/hadoop-fs/87eb1e7301e99db4
for pair in "$@"; do
  if [ $((pair % 2)) = 1 ]; then order="A C"; else order="C A"; fi
  for v in $order; do
    rm -f $CD/yarn-default.xml $CD/mapred-default.xml
    if [ $v = C ]; then for f in yarn-default.xml mapred-default.xml; do printf '<?xml version="1.0"?>\n<configuration>\n</configuration>\n' > $CD/$f; done; fi
    python -m bench.spark_profile --master 'local-cluster[2,1,1024]' --events 1000000 --files 10 > "$out/lc-kg$v-$pair.json" 2>"$out/err-$v-$pair.txt"
    echo "$(date -u +%H:%M:%S) $v $pair $(uptime | sed 's/.*average: //')" >> "$out/progress.txt"
  done
done
rm -f $CD/yarn-default.xml $CD/mapred-default.xml
