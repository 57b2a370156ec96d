#!/usr/bin/env bash
# Builds bullylab and runs its main job on the embedded defaults: a local
# cluster of bullylab nodes, a leader crash and restart, measured.
# Extra arguments go to the command, e.g. scripts/run.sh --nodes 7
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v go >/dev/null 2>&1; then
	if [ -x /usr/local/go/bin/go ]; then
		export PATH="/usr/local/go/bin:$PATH"
	else
		echo "scripts/run.sh: Go $(sed -n 's/^go //p' go.mod) or newer is required (https://go.dev/dl/); 'go' is not on PATH" >&2
		exit 1
	fi
fi

mkdir -p bin
go build -o bin/bullylab ./cmd/bullylab
exec bin/bullylab demo "$@"
