#!/bin/bash
# usage: cg.sh ROOT SCRIPT N1 N2 -> instructions(N2) - instructions(N1)
cd $1
export PYTHONHASHSEED=0 XDG_CACHE_HOME=${XDG_CACHE_HOME:-/tmp/route/xdg}
ir() { valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null $1/.venv/bin/python $2 $3 2>&1 | grep 'I *refs' | tr -d ', ' | sed 's/.*refs://'; }
a=$(ir $1 $2 $3); b=$(ir $1 $2 $4)
echo "$1 $(basename $2) $3->$4: $((b - a))"
