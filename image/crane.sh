#!/usr/bin/env bash
# Builds go-containerregistry's `crane` (packs and pushes OCI images without a container engine)
# from the Go module proxy with the machine's Go toolchain, cached outside the repository like
# the test control plane. Prints the binary's path. A second run with the same version is a no-op.
set -euo pipefail

CRANE_VERSION="${LABELLER_CRANE_VERSION:-v0.22.1}"
cache_root="${LABELLER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/labeller}"
out="$cache_root/tools/crane-$CRANE_VERSION"

if [[ -x "$out/crane" ]]; then
  echo "$out/crane"
  exit 0
fi

command -v go >/dev/null || { echo "crane.sh: no Go toolchain on PATH; install Go, or put crane on PATH and set CRANE=\$(command -v crane)" >&2; exit 3; }

echo "crane.sh: building crane $CRANE_VERSION" >&2
rm -rf "$out.partial"
mkdir -p "$out.partial"
GOBIN="$out.partial" CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-trimpath \
  go install -ldflags "-s -w" "github.com/google/go-containerregistry/cmd/crane@$CRANE_VERSION"
rm -rf "$out"
mv "$out.partial" "$out"
echo "$out/crane"
