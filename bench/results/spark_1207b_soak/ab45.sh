#!/bin/bash
# CPU A/B of the two daemons per master, alternating (cep's = the default; PySpark's by --conf)
S=bench/results/spark_1207b_soak/run.sh
A="--events 500000 --files 5 --key-groups 16"
PY="--conf spark.python.daemon.module=pyspark.daemon"
for i in 4 5; do
  for m in 'local[2]' 'local-cluster[2,1,1024]'; do
    t=$(echo "$m" | tr -d '[],-' | cut -c1-13)
    if [ $((i % 2)) = 1 ]; then
      $S ab-$t-cep-$i --master "$m" $A; $S ab-$t-pyspark-$i --master "$m" $A $PY
    else
      $S ab-$t-pyspark-$i --master "$m" $A $PY; $S ab-$t-cep-$i --master "$m" $A
    fi
  done
done
