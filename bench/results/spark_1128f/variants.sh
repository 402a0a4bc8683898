#!/bin/bash
# bench.spark_profile once per variant, one after the other (run from a checkout):
#   bench/results/spark_1128f/variants.sh OUTDIR MASTER EVENTS FILES VARIANT...
# each VARIANT is a ';'-separated list of Spark settings KEY=VALUE ("" = cep's defaults); OUTDIR/N.out is the
# profile's JSON line of variant N. Summary: python bench/results/spark_1128f/summary.py OUTDIR/*.out
out=$1; master=$2; ev=$3; files=$4; shift 4
mkdir -p "$out"
i=0
for v in "$@"; do
  args=()
  IFS=';' read -ra kvs <<< "$v"
  for kv in "${kvs[@]}"; do [ -n "$kv" ] && args+=(--conf "$kv"); done
  .venv/bin/python -m bench.spark_profile --master "$master" --events "$ev" --files "$files" "${args[@]}" > "$out/$i.out" 2>&1
  echo "$i [$v] $(uptime)" >> "$out/log"
  i=$((i+1))
done
