#!/bin/bash
# a longer soak (80 micro-batches of 5*10^4), both daemons, with each full collection's detail
S=bench/results/spark_1207b_soak/run.sh
A="--master local[1] --events 4000000 --files 80 --key-groups 16 --gc-log"
$S soak80-cep-1 $A
$S soak80-pyspark-1 $A --conf spark.python.daemon.module=pyspark.daemon
