#!/bin/bash
# usage: procs.sh JFR_DIR -- the processes the JVMs forked (JFR's jdk.ProcessStart), by command, per recording
for f in "$1"/jfr-*.jfr; do
  jfr print --json --events jdk.ProcessStart "$f" | python3 -c "
import json, sys, collections
evs = json.load(sys.stdin)['recording']['events']
print('$f', len(evs), collections.Counter(' '.join(e['values']['command'].split()[:2])[:60] for e in evs).most_common(12))"
done
