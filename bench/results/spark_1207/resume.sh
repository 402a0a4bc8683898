#!/bin/bash
# checkpoint written by the base checkout (2 files), resumed by this branch (2 more files): output = one run's
set -e
W=/tmp/sp/resume; rm -rf $W; mkdir -p $W/in $W/in1
head -40000 /tmp/cards200k.jsonl | split -l 10000 -d --additional-suffix=.jsonl - $W/in1/p
cp $W/in1/p00.jsonl $W/in1/p01.jsonl $W/in/
cd /tmp/base-s9 && .venv/bin/python -m cep.cli spark patterns/card_testing.pattern -i $W/in -o $W/out --checkpoint $W/ck --available-now --master 'local[1]' --state-partitions 2 2>&1 | tail -2
cp $W/in1/p02.jsonl $W/in1/p03.jsonl $W/in/
cd /work/wt-sparkplan && .venv/bin/python -m cep.cli spark patterns/card_testing.pattern -i $W/in -o $W/out --checkpoint $W/ck --available-now --master 'local[1]' --state-partitions 2 2>&1 | tail -2
cd /work/wt-sparkplan && .venv/bin/python -m cep.cli spark patterns/card_testing.pattern -i $W/in1 -o $W/out1 --checkpoint $W/ck1 --available-now --master 'local[1]' --state-partitions 2 --max-per-batch 2 2>&1 | tail -2
cat $W/out/part-* | sort > $W/a; cat $W/out1/part-* | sort > $W/b
wc -l $W/a $W/b; cmp $W/a $W/b && echo SAME
cd /work/wt-sparkplan && .venv/bin/python -m cep.cli run patterns/card_testing.pattern -i <(cat $W/in1/p0*.jsonl) -q | sort > $W/c; wc -l $W/c
