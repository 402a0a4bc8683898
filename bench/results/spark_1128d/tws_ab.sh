#!/bin/bash
cd "${CHECKOUT:-.}"
for i in 1 2; do for m in apply rows pandas; do
  rm -rf /tmp/sj/tws_$m$i
  echo "load $(cut -d' ' -f1 /proc/loadavg) $(date -u +%H:%M:%S)"
  timeout 600 .venv/bin/python bench/results/spark_1128d/tws.py $m 'local[1]' /tmp/sj/tws_$m$i 2>/dev/null | grep '^{'
done; done
