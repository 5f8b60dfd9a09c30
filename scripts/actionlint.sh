#!/usr/bin/env bash
# Builds actionlint (the linter of GitHub Actions workflows: schema, expressions, the shell of
# `run:` steps) from the Go module proxy with the machine's Go toolchain, cached outside the
# repository like image/crane.sh's crane. Prints the binary's path; a second run is a no-op.
#
#   "$(bash scripts/actionlint.sh)" .github/workflows/*.yml
set -euo pipefail

ACTIONLINT_VERSION="${LABELLER_ACTIONLINT_VERSION:-v1.7.12}"
cache_root="${LABELLER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/labeller}"
out="$cache_root/tools/actionlint-$ACTIONLINT_VERSION"

if [[ -x "$out/actionlint" ]]; then
  echo "$out/actionlint"
  exit 0
fi

command -v go >/dev/null || { echo "actionlint.sh: no Go toolchain on PATH; install Go" >&2; exit 3; }

echo "actionlint.sh: building actionlint $ACTIONLINT_VERSION" >&2
rm -rf "$out.partial"
mkdir -p "$out.partial"
GOBIN="$out.partial" CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-trimpath \
  go install -ldflags "-s -w" "github.com/rhysd/actionlint/cmd/actionlint@$ACTIONLINT_VERSION"
rm -rf "$out"
mv "$out.partial" "$out"
echo "$out/actionlint"
