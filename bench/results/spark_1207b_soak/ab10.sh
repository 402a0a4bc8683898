#!/bin/bash
# 3 more pairs per master with a longer steady state (10 micro-batches of 10^5, 9 steady), alternating
S=bench/results/spark_1207b_soak/run.sh
A="--events 1000000 --files 10 --key-groups 16"
PY="--conf spark.python.daemon.module=pyspark.daemon"
for i in 1 2 3; do
  for m in 'local[2]' 'local-cluster[2,1,1024]'; do
    t=$(echo "$m" | tr -d '[],-' | cut -c1-13)
    if [ $((i % 2)) = 1 ]; then
      $S ab10-$t-cep-$i --master "$m" $A; $S ab10-$t-pyspark-$i --master "$m" $A $PY
    else
      $S ab10-$t-pyspark-$i --master "$m" $A $PY; $S ab10-$t-cep-$i --master "$m" $A
    fi
  done
done
