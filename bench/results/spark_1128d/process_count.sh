#!/bin/bash
# Processes the Spark JVMs fork during a cep spark query (local[1], 30 micro-batches of 1 000 events after a warm-up
# query): JFR's jdk.ProcessStart events by command. Run from a checkout: bench/results/spark_1128d/process_count.sh DIR
set -e
d=${1:-/tmp/cep-process-count}
rm -rf "$d"
here=$(dirname "$0")
# JFR's profile settings with Java sampling every 2 ms (the JDK's own profile.jfc, edited)
jfc="$(dirname "$(readlink -f "$(command -v java)")")/../lib/jfr/profile.jfc"
sed 's#<setting name="period" control="method-sampling-java-interval">[^<]*<#<setting name="period" control="method-sampling-java-interval">2 ms<#' "$jfc" > "$d.fast.jfc"
sed "s#/tmp/sj/fast.jfc#$d.fast.jfc#" "$here/jfrrun.py" > "$d.jfrrun.py"
.venv/bin/python "$d.jfrrun.py" 'local[1]' 30000 30 "$d" 2>/dev/null | grep -v WARN
jfr print --json --events jdk.ProcessStart "$d"/jfr-*.jfr | python3 -c "
import json, sys, collections
evs = json.load(sys.stdin)['recording']['events']
print(len(evs), collections.Counter(e['values']['command'].split()[0] for e in evs).most_common())"
ls "$d/ck-main/commits" "$d/ck-warm/commits" | grep -c '^[0-9]'
