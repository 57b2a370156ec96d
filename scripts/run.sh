#!/usr/bin/env bash
# Builds bullylab and runs its main job on the embedded defaults: a bench of
# the leader-crash scenario on the built-in star16 testbed (30 runs, each
# on fresh network namespaces with a live capture), printing the summary
# table and writing results.json, bench.txt, report.html and the captures
# to bench-out/. Needs root (it creates network namespaces); run through
# sudo when not root. Extra arguments go to `bullylab bench`, e.g.
#   scripts/run.sh --topology star5 --runs 10 --scenario partition-minority
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
# Static: every node process of a testbed starts faster without the
# dynamic loader and glibc, and without urfave/cli's docs generator
# (see node/cluster.Build).
CGO_ENABLED=0 go build -tags urfave_cli_no_docs -o bin/bullylab ./cmd/bullylab
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		exec sudo bin/bullylab bench --out bench-out "$@"
	fi
	echo "scripts/run.sh: the bench builds network namespaces and needs root; run it as root or install sudo" >&2
	exit 1
fi
exec bin/bullylab bench --out bench-out "$@"
