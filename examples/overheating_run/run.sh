#!/usr/bin/env bash
# Runs this example from the repository root; composite events go to stdout
# (compare with expected.jsonl: same lines, in any order).
set -euo pipefail
cd "$(dirname "$0")/../.."
exec cep run patterns/overheating_run.pattern -i examples/overheating_run/input.jsonl "$@"
