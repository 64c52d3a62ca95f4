#!/usr/bin/env bash
# Runs examples/live_models against a real endpoint for each provider whose key is in the
# environment (OPENAI_API_KEY, ANTHROPIC_API_KEY), and says which it skipped (docs/models.md).
# REMITVM names the tool (default: build/release/cli/remitvm). State goes to a temporary directory.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
remitvm=${REMITVM:-$here/../../build/release/cli/remitvm}
state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT
topic=${1:-otters}
ran=0
for provider in openai anthropic; do
    var=$(echo "$provider" | tr a-z A-Z)_API_KEY
    if [[ -z "${!var:-}" ]]; then
        echo "live_models: skipped $provider ($var is not set)"
        continue
    fi
    policy=policy.toml
    [[ $provider == anthropic ]] && policy=policy.anthropic.toml
    echo "live_models: $provider ($policy)"
    "$remitvm" run "$here/live_models.rmt" --policy "$here/$policy" --state-dir "$state" -i "topic=$topic"
    ran=$((ran + 1))
done
echo "live_models: ran against $ran provider(s)"
