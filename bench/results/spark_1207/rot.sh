#!/bin/bash
# usage: rot.sh OUTDIR MASTER N -- spark_profile runs in rotation (same load): the base checkout /tmp/base-s9,
# this branch, this branch with no code generation (spark.sql.codegen.factoryMode=NO_CODEGEN,
# spark.sql.codegen.wholeStage=false); each `--events 400000 --files 4` (3 steady 10^5-event micro-batches)
out=$1; master=$2; n=$3
mkdir -p $out
for i in $(seq 1 $n); do
  for side in base new nocg; do
    root=/work/wt-sparkplan; extra=()
    [ $side = base ] && root=/tmp/base-s9
    [ $side = nocg ] && extra=(--conf spark.sql.codegen.factoryMode=NO_CODEGEN --conf spark.sql.codegen.wholeStage=false)
    (cd $root && PATH=$root/.venv/bin:$PATH $root/.venv/bin/python -m bench.spark_profile --master "$master" \
       --events 400000 --files 4 "${extra[@]}" > $out/$side-$i.json 2> $out/$side-$i.err)
    echo "$(date -u +%H:%M:%S) $side $i load $(cut -d' ' -f1 /proc/loadavg)" >> $out/log
  done
done
