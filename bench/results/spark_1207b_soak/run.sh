#!/bin/bash
# One spark_profile run with the START/END etiquette: run.sh TAG ARGS... -> TAG.json, load in TAG.load
# (waits while any other owner's SPARK BENCH START has no END after it)
cd /work/wt-soak
tag=$1; shift
out=bench/results/spark_1207b_soak
until python3 $out/busy.py > /dev/null; do sleep 15; done  # every other owner's START has its END
echo "$(date -u +%H:%M) SPARK BENCH START $$ soak ($tag)" >> /work/coord/STATUS.md
uptime > $out/$tag.load
PYTHONDONTWRITEBYTECODE=1 .venv/bin/python -m bench.spark_profile "$@" > $out/$tag.json 2> /tmp/soak-$tag.err
rc=$?
uptime >> $out/$tag.load
echo "$(date -u +%H:%M) SPARK BENCH END soak" >> /work/coord/STATUS.md
echo "$tag rc=$rc $*" >> $out/runs.log
