#!/bin/bash
# checkpoint written by the base checkout (2 files, local[2]), resumed by this branch (4 more files, one per
# micro-batch, local[2]: the workers swap partitions, stale entries reused): output = one uninterrupted run's
set -e
W=/tmp/sp/resume; rm -rf $W; mkdir -p $W/in $W/in1
head -60000 /tmp/cards200k.jsonl | split -l 10000 -d --additional-suffix=.jsonl - $W/in1/p
for i in 0 1 2 3 4 5; do touch -d "@$(( $(date +%s) - 600 + i * 10 ))" $W/in1/p0$i.jsonl; done  # file order = time order
cp -p $W/in1/p00.jsonl $W/in1/p01.jsonl $W/in/
cd /tmp/base-s10 && .venv/bin/python -m cep.cli spark patterns/card_testing.pattern -i $W/in -o $W/out --checkpoint $W/ck --available-now --master 'local[2]' --state-partitions 2 --max-per-batch 1 2>&1 | tail -2
cp -p $W/in1/p0[2-5].jsonl $W/in/
cd /work/wt-statepy && .venv/bin/python -m cep.cli spark patterns/card_testing.pattern -i $W/in -o $W/out --checkpoint $W/ck --available-now --master 'local[2]' --state-partitions 2 --max-per-batch 1 2>&1 | tail -2
cd /tmp/base-s10 && .venv/bin/python -m cep.cli spark patterns/card_testing.pattern -i $W/in1 -o $W/out1 --checkpoint $W/ck1 --available-now --master 'local[2]' --state-partitions 2 --max-per-batch 1 2>&1 | tail -2
cat $W/out/part-* | sort > $W/a; cat $W/out1/part-* | sort > $W/b
wc -l $W/a $W/b; cmp $W/a $W/b && echo SAME
cd /work/wt-statepy && .venv/bin/python -m cep.cli run patterns/card_testing.pattern -i <(cat $W/in1/p0*.jsonl) -q | sort > $W/c; wc -l $W/c; cmp $W/a $W/c && echo SAME_AS_CEP_RUN
