#!/bin/bash
out=${OUT:-/tmp/plumb/kg}; mkdir -p $out
for master in 'local[1]' 'local-cluster[2,1,1024]'; do
  m=$(echo "$master" | tr -d '[],' | cut -c1-14)
  for pair in 1 2; do
    if [ $pair = 1 ]; then order="16 4"; else order="4 16"; fi
    for kg in $order; do
      (cd /work/wt-plumb && .venv/bin/python -m bench.worker_marks --logs $out/wl-$m-kg$kg-$pair -- --master "$master" --events 500000 --files 5 --key-groups $kg > $out/$m-kg$kg-$pair.txt 2>&1)
      echo "$(date -u +%H:%M:%S) $master kg$kg $pair done" >> $out/progress.txt
    done
  done
done
