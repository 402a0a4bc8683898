#!/bin/bash
# the memory soak on local-cluster (a worker per executor), both daemons
S=bench/results/spark_1207b_soak/run.sh
A="--master local-cluster[2,1,1024] --events 2000000 --files 40 --key-groups 16 --gc-log"
$S soaklc-cep-1 $A
$S soaklc-pyspark-1 $A --conf spark.python.daemon.module=pyspark.daemon
