#!/bin/bash
# spark_profile local[2] A/B, branch and base alternating; JSON/ text per run in /tmp/sp/prof
for r in 1 2 3 4; do
  for ROOT in /work/wt-statepy /tmp/base-s10; do
    tag=$(basename $ROOT)-$r
    cd $ROOT && PATH=$ROOT/.venv/bin:$PATH PYTHONPATH=$ROOT python -m bench.spark_profile --master 'local[2]' --events 500000 --files 5 --key-groups 16 > /tmp/sp/prof/$tag.out 2>&1
    echo "$tag $(uptime | sed 's/.*load average: //')"
  done
done
