#!/bin/bash
# usage: rot.sh OUTDIR ROUNDS VARIANTS_FILE -- run bench.spark_profile for every variant in turn, ROUNDS times.
# VARIANTS_FILE: one line per variant: LABEL ROOT ARGS... (ROOT: a checkout with its own .venv; ARGS: spark_profile's)
# JSON per run in OUTDIR/LABEL-ROUND.json; a log line per run (time, label, load) in OUTDIR/log
out=$1; rounds=$2; variants=$3
mkdir -p "$out"
for i in $(seq 1 "$rounds"); do
  while read -r label root args; do
    [ -z "$label" ] && continue
    case "$label" in \#*) continue;; esac
    (cd "$root" && eval PATH="$root/.venv/bin:$PATH" "$root/.venv/bin/python" -m bench.spark_profile $args \
       > "$out/$label-$i.json" 2> "$out/$label-$i.err")
    echo "$(date -u +%H:%M:%S) $label $i load $(cut -d' ' -f1 /proc/loadavg)" >> "$out/log"
  done < "$variants"
done
