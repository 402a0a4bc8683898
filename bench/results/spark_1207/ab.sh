#!/bin/bash
# usage: ab.sh OUTDIR MASTER N [VARIANT_ROOT] -- spark_profile runs alternating: this branch (wt-sparkplan) and
# the base checkout /tmp/base-s9, each `--events 400000 --files 4` (3 steady micro-batches of 10^5 events);
# extra arguments (after --) go to both sides: ab.sh OUT 'local[1]' 3 -- --conf K=V
out=$1; master=$2; n=$3; shift 3
[ "$1" = "--" ] && shift
mkdir -p $out
for i in $(seq 1 $n); do
  for side in new base; do
    if [ $side = new ]; then root=/work/wt-sparkplan; else root=/tmp/base-s9; fi
    (cd $root && PATH=$root/.venv/bin:$PATH $root/.venv/bin/python -m bench.spark_profile --master "$master" \
       --events 400000 --files 4 "$@" > $out/$side-$i.json 2> $out/$side-$i.err)
    echo "$(date -u +%H:%M:%S) $side $i load $(cut -d' ' -f1 /proc/loadavg)" >> $out/log
  done
done
