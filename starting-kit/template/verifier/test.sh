#!/usr/bin/env bash
# Verifier entry point: run the pytest checks of the final state and write the reward,
# 1.0 when every check passes and 0.0 otherwise. Always exits 0: the reward file is the
# verdict. Needs no network: python3 and pytest are baked into the image, and the
# harness passes BENCHFLOW_PYTEST_BIN, a pytest that writes per-test details (--ctrf).
set -u
VERIFIER_DIR="${BENCHFLOW_VERIFIER_DIR:-$(cd "$(dirname "$0")" && pwd)}"
REWARD_TEXT="${BENCHFLOW_REWARD_TEXT:-/logs/verifier/reward.txt}"
REWARD_JSON="${BENCHFLOW_REWARD_JSON:-/logs/verifier/reward.json}"
CTRF_JSON="${BENCHFLOW_CTRF_JSON:-/logs/verifier/ctrf.json}"
mkdir -p "$(dirname "$REWARD_TEXT")" "$(dirname "$REWARD_JSON")" "$(dirname "$CTRF_JSON")"
# The verifier folder is read-only: keep pytest from caching there.
if [ -n "${BENCHFLOW_PYTEST_BIN:-}" ]; then
  # shellcheck disable=SC2086  # the variable may hold a command with arguments
  $BENCHFLOW_PYTEST_BIN --ctrf "$CTRF_JSON" "$VERIFIER_DIR/test_outputs.py" -rA -v \
    -p no:cacheprovider
else
  python3 -m pytest "$VERIFIER_DIR/test_outputs.py" -rA -v -p no:cacheprovider
fi
if [ $? -eq 0 ]; then
  reward=1.0
else
  reward=0.0
fi
printf '%s\n' "$reward" > "$REWARD_TEXT"
printf '{"reward": %s}\n' "$reward" > "$REWARD_JSON"
exit 0
