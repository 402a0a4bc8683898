#!/bin/bash
# the workers' garbage collections per master and daemon (--gc-log: which collections, their CPU)
S=bench/results/spark_1207b_soak/run.sh
A="--events 500000 --files 5 --key-groups 16 --gc-log"
PY="--conf spark.python.daemon.module=pyspark.daemon"
for m in 'local-cluster[2,1,1024]' 'local[2]'; do
  t=$(echo "$m" | tr -d '[],-' | cut -c1-13)
  $S gc-$t-cep-1 --master "$m" $A; $S gc-$t-pyspark-1 --master "$m" $A $PY
done
