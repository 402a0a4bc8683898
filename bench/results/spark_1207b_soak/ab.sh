#!/bin/bash
# CPU A/B of the two daemons per master, alternating (cep's = the default; PySpark's by --conf):
#   ab.sh PREFIX "SPARK_PROFILE ARGS" PAIR...     (from the repository root) -> PREFIX-MASTER-{cep,pyspark}-PAIR.json
# The runs of spark.md's soak section:
#   ab.sh ab "--events 500000 --files 5 --key-groups 16" 1 2 3 4 5
#   ab.sh ab10 "--events 1000000 --files 10 --key-groups 16" 1 2 3
S=bench/results/spark_1207b_soak/run.sh
prefix=$1 A=$2
shift 2
PY="--conf spark.python.daemon.module=pyspark.daemon"
for i in "$@"; do
  for m in 'local[2]' 'local-cluster[2,1,1024]'; do
    t=$(echo "$m" | tr -d '[],-' | cut -c1-13)
    if [ $((i % 2)) = 1 ]; then  # odd pairs run cep's daemon first
      $S $prefix-$t-cep-$i --master "$m" $A; $S $prefix-$t-pyspark-$i --master "$m" $A $PY
    else
      $S $prefix-$t-pyspark-$i --master "$m" $A $PY; $S $prefix-$t-cep-$i --master "$m" $A
    fi
  done
done
