#!/bin/bash
# One spark_profile run with the START/END etiquette: run.sh TAG ARGS... -> TAG.json, load in TAG.load
# (waits while another helper's SPARK BENCH START has no END)
cd /work/wt-soak
tag=$1; shift
out=bench/results/spark_1207b_soak
while :; do
  last=$(grep "SPARK BENCH" /work/coord/STATUS.md | tail -1)
  case "$last" in *START*) sleep 15;; *) break;; esac
done
echo "$(date -u +%H:%M) SPARK BENCH START $$ soak ($tag)" >> /work/coord/STATUS.md
uptime > $out/$tag.load
PYTHONDONTWRITEBYTECODE=1 .venv/bin/python -m bench.spark_profile "$@" > $out/$tag.json 2> $out/$tag.err
rc=$?
uptime >> $out/$tag.load
echo "$(date -u +%H:%M) SPARK BENCH END soak" >> /work/coord/STATUS.md
echo "$tag rc=$rc $*" >> $out/runs.log
