#!/bin/bash
# usage: ab.sh OUTDIR MASTER N  -- alternate spark_profile runs of this branch (wt-jvm) and base-s8
out=$1; master=$2; n=$3; shift 3
mkdir -p $out
for i in $(seq 1 $n); do
  for side in jvm base; do
    if [ $side = jvm ]; then root=/work/wt-jvm; else root=/tmp/base-s8; fi
    (cd $root && PATH=$root/.venv/bin:$PATH $root/.venv/bin/python -m bench.spark_profile --master "$master" --events 500000 --files 5 "$@" > $out/$side-$i.json 2> $out/$side-$i.err)
    echo "$(date -u +%H:%M:%S) $side $i load $(cut -d' ' -f1 /proc/loadavg)" >> $out/log
  done
done
