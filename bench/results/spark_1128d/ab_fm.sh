#!/bin/bash
cd "${CHECKOUT:-.}"
FM=spark.sql.streaming.checkpointFileManagerClass=org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager
for i in 1 2; do
  for v in off on; do
    if [ $v = on ]; then C="--conf $FM"; else C=""; fi
    echo "== $v $i load $(cut -d' ' -f1 /proc/loadavg)"
    .venv/bin/python -m bench.spark_profile --events 16000 --files 16 --master 'local-cluster[2,1,1024]' $C 2>/dev/null | python3 -c "
import json,sys; d=json.load(sys.stdin); s=d['steady_cpu_user_sys']; n=d['steady_batches']
print('$v', n, 'per batch total', round(d['steady_cpu_total']/n,3), {k: round(sum(v)/n,3) for k,v in s.items()})"
  done
done
