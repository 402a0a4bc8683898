#!/bin/bash
# cg.sh ROOT swap|hits B N -> instructions of swap.py (B micro-batches of N events; B=4 minus B=2: 2 steady ones)
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$1; export CG=$2 B=$3 N=$4
mkdir -p /tmp/sp/xdg
cd $ROOT && PYTHONPATH=$ROOT PYTHONHASHSEED=0 XDG_CACHE_HOME=/tmp/sp/xdg valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null $ROOT/.venv/bin/python $HERE/swap.py 2>&1 | grep "I *refs" | awk -v r="$ROOT $CG B=$B N=$N" '{print r, $NF}'
