#!/bin/bash
# Verifier entry point: run the pytest checks in test_outputs.py against the final
# state of the workspace and write the reward. Nothing is installed or downloaded:
# pytest is baked into the image, and the harness passes BENCHFLOW_PYTEST_BIN (a
# pytest that understands --ctrf). test.sh always exits 0; the reward carries the verdict.

VERIFIER_DIR="${BENCHFLOW_VERIFIER_DIR:-/verifier}"
if [ ! -d "$VERIFIER_DIR" ] && [ -d /tests ]; then
  VERIFIER_DIR=/tests
fi

REWARD_TEXT="${BENCHFLOW_REWARD_TEXT:-/logs/verifier/reward.txt}"
REWARD_JSON="${BENCHFLOW_REWARD_JSON:-/logs/verifier/reward.json}"
CTRF_JSON="${BENCHFLOW_REWARD_DETAILS_JSON:-${BENCHFLOW_CTRF_JSON:-/logs/verifier/ctrf.json}}"
PYTEST_BIN="${BENCHFLOW_PYTEST_BIN:-pytest}"

mkdir -p "$(dirname "$REWARD_TEXT")" "$(dirname "$REWARD_JSON")" "$(dirname "$CTRF_JSON")"

# PYTEST_BIN stays unquoted so that a command with arguments ("python3 -m pytest")
# works too. The verifier directory is read-only: keep pytest from caching there.
# shellcheck disable=SC2086
$PYTEST_BIN --ctrf "$CTRF_JSON" "$VERIFIER_DIR/test_outputs.py" -rA -v -p no:cacheprovider
PYTEST_EXIT_CODE=$?

if [ $PYTEST_EXIT_CODE -eq 0 ]; then
  REWARD=1.0
else
  REWARD=0.0
fi

printf '%s\n' "$REWARD" > "$REWARD_TEXT"
printf '{"reward": %s}\n' "$REWARD" > "$REWARD_JSON"

exit 0
