#!/bin/bash
# after the rebase onto daemon 66ecda8 (full collection once the oldest generation grew by a quarter)
S=bench/results/spark_1207b_soak/run.sh
A="--master local[1] --events 2000000 --files 40 --key-groups 16 --gc-log"
$S soak-cep66-1 $A
$S run10k-cep66-1 $A --pattern patterns/card_testing_run.pattern --keys 10000
bench/results/spark_1207b_soak/ab.sh
