#!/bin/bash
# main (A), branch yarn (C: empty yarn-default.xml), branch + empty mapred-default.xml (D); local-cluster, rotating
out=/tmp/me/yarn3; CD=/root/.cache/cep/hadoop-fs/70841fc5bcd0243a
for r in "$@"; do
  case $((r % 3)) in 1) order="A C D";; 2) order="C D A";; 0) order="D A C";; esac
  for v in $order; do
    rm -f $CD/mapred-default.xml
    if [ $v = A ]; then cd /work/main; py=python; else cd /work/wt-yarn; py=.venv/bin/python; fi
    if [ $v = D ]; then printf '<?xml version="1.0"?>\n<configuration>\n</configuration>\n' > $CD/mapred-default.xml; fi
    $py -m bench.spark_profile --master 'local-cluster[2,1,1024]' --events 1000000 --files 10 > "$out/lc-kg$v-$r.json" 2>"$out/err-$v-$r.txt"
    echo "$(date -u +%H:%M:%S) $v $r $(uptime | sed 's/.*average: //')" >> "$out/progress.txt"
  done
done
rm -f $CD/mapred-default.xml
