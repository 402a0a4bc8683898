#!/bin/bash
# A/B: base e841be6 (/work/wt-plumb-base) vs plumb (/work/wt-plumb), interleaved ABBA, worker marks on both
out=${OUT:-/tmp/plumb/ab}; mkdir -p $out
i=0
for master in 'local[1]' 'local-cluster[2,1,1024]'; do
  m=$(echo "$master" | tr -d '[],' | cut -c1-14)
  for pair in 1 2 3; do
    if [ $((pair % 2)) = 1 ]; then order="wt-plumb-base wt-plumb"; else order="wt-plumb wt-plumb-base"; fi
    for w in $order; do
      i=$((i+1))
      (cd /work/$w && .venv/bin/python -m bench.worker_marks --logs $out/wl-$m-$w-$pair -- --master "$master" --events 500000 --files 5 --key-groups 16 > $out/$m-$w-$pair.txt 2>&1)
      echo "$(date -u +%H:%M:%S) $master $w $pair done" >> $out/progress.txt
    done
  done
done
