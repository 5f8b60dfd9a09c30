#!/usr/bin/env bash
# Builds the test control plane (kube-apiserver and etcd) from the Go module proxy with the
# machine's Go toolchain, and caches the binaries outside the repository, keyed by version.
# Prints the folder holding the binaries. A second run with the same versions is a no-op.
set -euo pipefail

K8S_VERSION="${LABELLER_K8S_VERSION:-v1.36.3}"
ETCD_VERSION="${LABELLER_ETCD_VERSION:-v3.6.16}"
cache_root="${LABELLER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/labeller}"
out="$cache_root/controlplane/kube-$K8S_VERSION-etcd-$ETCD_VERSION"

if [[ -x "$out/kube-apiserver" && -x "$out/etcd" ]]; then
  echo "$out"
  exit 0
fi

command -v go >/dev/null || { echo "build.sh: no Go toolchain on PATH; install Go or set KUBEBUILDER_ASSETS to a folder with kube-apiserver and etcd" >&2; exit 3; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$out.partial"
export GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN=local

log() { echo "build.sh: $*" >&2; }

# kube-apiserver: k8s.io/kubernetes replaces its staging modules with local paths, and replace
# directives do not carry over to dependents, so mirror each one with the published v0.X.Y.
log "building kube-apiserver $K8S_VERSION"
mkdir -p "$work/kube"
(
  cd "$work/kube"
  go mod init labeller.test/kube >/dev/null 2>&1
  gomod="$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^\s*"GoMod": "\(.*\)",\?$/\1/p')"
  staging_version="v0.${K8S_VERSION#v1.}"
  grep -oE '^\s*k8s\.io/[a-z0-9-]+ => \./staging/src/k8s\.io/[a-z0-9-]+' "$gomod" | awk '{print $1}' | sort -u |
    while read -r m; do go mod edit -replace "$m=$m@$staging_version"; done
  go mod edit -require "k8s.io/kubernetes@$K8S_VERSION"
  go get "k8s.io/kubernetes/cmd/kube-apiserver@$K8S_VERSION" >&2
  v="k8s.io/component-base/version"
  minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
  go build -trimpath -ldflags "-s -w -X $v.gitVersion=$K8S_VERSION -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean" \
    -o "$out.partial/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
)

log "building etcd $ETCD_VERSION"
mkdir -p "$work/etcd"
(
  cd "$work/etcd"
  go mod init labeller.test/etcd >/dev/null 2>&1
  go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2
  go build -trimpath -ldflags "-s -w" -o "$out.partial/etcd" go.etcd.io/etcd/server/v3
)

rm -rf "$out"
mv "$out.partial" "$out"
log "cached in $out ($(du -sh "$out" | cut -f1))"
echo "$out"
