#!/usr/bin/env bash
# scripts/chaos.sh: a bounded sample of the randomized fault runs (chaos/),
# for CI: a few minutes of kfake seeds, then a few seeds on the three-broker
# cluster (scripts/kafka.sh cluster) when Java and Maven are there.
#
# The seeds change on every run and are printed; a failing seed prints the
# command that reruns it. Consecutive seeds draw every fault kind at least
# once (the first fault of seed S is kind S mod the number of kinds): 8 kfake
# runs cover the consumer-side kinds, and the cluster seeds start at a broker
# kill, then a broker hang.
#
# Environment:
#   CHAOS_KFAKE_BUDGET   how long to start new kfake runs (default 3m; a run
#                        started before the budget ends finishes, ~5-20s)
#   CHAOS_CLUSTER_RUNS   runs on the three-broker cluster (default 3; 0 skips)
#   CHAOS_SEED           first seed (default: from the clock)
#   CHAOS_WITHOUT        fault kinds not drawn, comma-separated (default: none)
#   CI=true              a cluster that cannot start fails the script
#
# It exits non-zero when a run finds a violation. The cluster is started (and
# stopped at the end) only if it is not running already.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

BUDGET="${CHAOS_KFAKE_BUDGET:-3m}"
CRUNS="${CHAOS_CLUSTER_RUNS:-3}"
SEED="${CHAOS_SEED:-$(($(date +%s%N) % 1000000000 + 1))}"
WITHOUT="${CHAOS_WITHOUT-}"
BIN="$(mktemp -d)/chaos"
trap 'rm -rf "$(dirname "$BIN")"' EXIT

go build -o "$BIN" ./chaos
status=0

echo "==> chaos on kfake: seeds from $SEED for $BUDGET"
"$BIN" -backend kfake -runs 100000 -budget "$BUDGET" -seed "$SEED" -without "$WITHOUT" || status=1

if [ "$CRUNS" -gt 0 ]; then
  if command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1; then
    # The first cluster seed draws a broker kill first, the second a broker
    # hang: seed mod the number of kinds (13 on the cluster, less those left
    # out) is 0, then 1.
    kinds=$((13 - $(echo "$WITHOUT" | tr ',' '\n' | grep -c . || true)))
    CSEED=$(((SEED + 500000) / kinds * kinds + kinds))
    echo "==> chaos on the three-broker cluster: $CRUNS runs from seed $CSEED"
    rc=0
    "$BIN" -backend cluster -runs "$CRUNS" -seed "$CSEED" -without "$WITHOUT" || rc=$?
    # 2: the cluster could not start (or a usage error), 1: violations.
    if [ $rc -eq 2 ] && [ "${CI:-}" != true ]; then
      echo "chaos: WARNING: the three-broker cluster could not start: cluster seeds skipped"
    elif [ $rc -ne 0 ]; then
      status=1
    fi
  elif [ "${CI:-}" = true ]; then
    echo "chaos: java and mvn are needed for the cluster seeds (CI=true)"; status=1
  else
    echo "chaos: WARNING: java or mvn missing: cluster seeds skipped"
  fi
fi
exit $status
