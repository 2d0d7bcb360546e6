#!/bin/sh
# A longer run of the structural fuzzer of `draview analyze` (tests/unit/test_fuzz_inputs.py):
# a bigger budget and fresh random cases every run (CI runs a small fixed set).
# Usage: bench/fuzz/run.sh [CASES_PER_TEST] [pytest args…]   (default 2000)
set -eu
cd "$(dirname "$0")/../.."
cases=${1:-2000}
[ $# -gt 0 ] && shift
start=$(date +%s)
DRAVIEW_FUZZ_EXAMPLES=$cases DRAVIEW_FUZZ_RANDOM=1 PYTHONPATH="$PWD/operator" \
  python3 -m pytest -q -p no:cacheprovider -W ignore::DeprecationWarning \
  tests/unit/test_fuzz_inputs.py --hypothesis-show-statistics "$@"
echo "fuzz: $cases cases per test, $(( $(date +%s) - start )) s"
