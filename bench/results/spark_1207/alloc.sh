#!/bin/bash
# usage: alloc.sh OUTDIR N [SIDES] -- spark_profile (local[1]) runs alternating between this branch and the base
# checkout's code run by this branch's bench/spark_profile.py (/tmp/sp/basex: /tmp/base-s9 with this branch's
# spark_profile, for the driver JVM's allocation per micro-batch), `--events 400000 --files 4`
out=$1; n=$2; sides=${3:-"new base"}
mkdir -p $out
for i in $(seq 1 $n); do
  for side in $sides; do
    root=/work/wt-sparkplan; py=/work/wt-sparkplan/.venv/bin/python
    [ $side = base ] && root=/tmp/sp/basex && py=/tmp/base-s9/.venv/bin/python
    (cd $root && PATH=$(dirname $py):$PATH $py -m bench.spark_profile --master 'local[1]' \
       --events 400000 --files 4 > $out/$side-$i.json 2> $out/$side-$i.err)
    echo "$(date -u +%H:%M:%S) $side $i load $(cut -d' ' -f1 /proc/loadavg)" >> $out/log
  done
done
