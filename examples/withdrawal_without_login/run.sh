#!/usr/bin/env bash
# Runs this example from the repository root; composite events go to stdout
# (compare with expected.jsonl: same lines, in any order).
set -euo pipefail
cd "$(dirname "$0")/../.."
exec cep run patterns/withdrawal_without_login.pattern -i examples/withdrawal_without_login/input.jsonl "$@"
