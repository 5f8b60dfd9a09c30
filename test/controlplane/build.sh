#!/usr/bin/env bash
# Builds the test control plane from the Go module proxy with the machine's Go toolchain, and
# caches the binaries outside the repository, keyed by version. Prints the folder holding them.
#
#   build.sh          kube-apiserver and etcd: the bare API server
#   build.sh --full   also kube-controller-manager, kube-scheduler and kwok (with its default
#                     node and pod stages in kwok-stages.yaml): a cluster whose controllers run
#                     and whose pods are scheduled onto simulated nodes
#
# Each binary is built only if it is missing, so --full after a bare build adds the rest, and a
# second run with the same versions is a no-op. Concurrent runs for the same versions wait for
# each other instead of building twice.
set -euo pipefail

K8S_VERSION="${LABELLER_K8S_VERSION:-v1.37.2}"
ETCD_VERSION="${LABELLER_ETCD_VERSION:-v3.6.16}"
KWOK_VERSION="${LABELLER_KWOK_VERSION:-v0.8.0}"
full=false
case "${1:-}" in
  --full) full=true ;;
  '') ;;
  *) echo "usage: build.sh [--full]" >&2; exit 2 ;;
esac
cache_root="${LABELLER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/labeller}"
out="$cache_root/controlplane/kube-$K8S_VERSION-etcd-$ETCD_VERSION"
# kwok does not depend on the Kubernetes version: one build serves every version folder (a link).
kwok_out="$cache_root/controlplane/kwok-$KWOK_VERSION"

kube=(kube-apiserver)
$full && kube+=(kube-controller-manager kube-scheduler)
complete() {
  for bin in "${kube[@]}" etcd; do [[ -x "$out/$bin" ]] || return 1; done
  ! $full || [[ -x "$out/kwok" && -f "$out/kwok-stages.yaml" ]]
}
if complete; then
  echo "$out"
  exit 0
fi

command -v go >/dev/null || { echo "build.sh: no Go toolchain on PATH; install Go or set KUBEBUILDER_ASSETS to a folder with the binaries" >&2; exit 3; }

mkdir -p "$out" "$kwok_out"
exec 9>"$out.lock"
flock 9
if complete; then
  echo "$out"
  exit 0
fi
# Sources in a temporary folder; binaries first into .building folders beside the cache, then
# renamed into place one by one, so a folder never holds a partly written binary.
work="$(mktemp -d)"
cleanup=("$work" "$out/.building")
trap 'rm -rf "${cleanup[@]}"' EXIT
rm -rf "$out/.building"
mkdir -p "$out/.building"
export GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN=local

log() { echo "build.sh: $*" >&2; }
# Seconds since the build of one part started, for the log.
since() { echo "$((SECONDS - $1)) s"; }

# kube-*: k8s.io/kubernetes replaces its staging modules with local paths, and replace
# directives do not carry over to dependents, so mirror each one with the published v0.X.Y.
missing=()
for bin in "${kube[@]}"; do [[ -x "$out/$bin" ]] || missing+=("$bin"); done
if ((${#missing[@]})); then
  started=$SECONDS
  log "building ${missing[*]} $K8S_VERSION"
  mkdir -p "$work/kube"
  (
    cd "$work/kube"
    go mod init labeller.test/kube >/dev/null 2>&1
    gomod="$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^\s*"GoMod": "\(.*\)",\?$/\1/p')"
    staging_version="v0.${K8S_VERSION#v1.}"
    grep -oE '^\s*k8s\.io/[a-z0-9-]+ => \./staging/src/k8s\.io/[a-z0-9-]+' "$gomod" | awk '{print $1}' | sort -u |
      while read -r m; do go mod edit -replace "$m=$m@$staging_version"; done
    go mod edit -require "k8s.io/kubernetes@$K8S_VERSION"
    packages=("${missing[@]/#/k8s.io/kubernetes/cmd/}")
    go get "${packages[@]/%/@$K8S_VERSION}" >&2
    v="k8s.io/component-base/version"
    minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
    go build -trimpath -ldflags "-s -w -X $v.gitVersion=$K8S_VERSION -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean" \
      -o "$out/.building/" "${packages[@]}"
  )
  for bin in "${missing[@]}"; do mv "$out/.building/$bin" "$out/$bin"; done
  log "built ${missing[*]} in $(since "$started")"
fi

if [[ ! -x "$out/etcd" ]]; then
  started=$SECONDS
  log "building etcd $ETCD_VERSION"
  mkdir -p "$work/etcd"
  (
    cd "$work/etcd"
    go mod init labeller.test/etcd >/dev/null 2>&1
    go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2
    go build -trimpath -ldflags "-s -w" -o "$out/.building/etcd" go.etcd.io/etcd/server/v3
  )
  mv "$out/.building/etcd" "$out/etcd"
  log "built etcd in $(since "$started")"
fi

if $full; then
  exec 8>"$kwok_out.lock"
  flock 8
  if [[ ! -x "$kwok_out/kwok" || ! -f "$kwok_out/kwok-stages.yaml" ]]; then
    started=$SECONDS
    cleanup+=("$kwok_out/.building")
    rm -rf "$kwok_out/.building"
    mkdir -p "$kwok_out/.building"
    log "building kwok $KWOK_VERSION"
    mkdir -p "$work/kwok"
    (
      cd "$work/kwok"
      go mod init labeller.test/kwok >/dev/null 2>&1
      go get "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" >&2
      go build -trimpath -ldflags "-s -w" -o "$kwok_out/.building/kwok" sigs.k8s.io/kwok/cmd/kwok
      # The stages kwokctl gives a kwok it starts: nodes become Ready and keep their Lease fresh
      # (else the node lifecycle controller evicts their pods), pods become Running and Ready,
      # Job pods complete, deleted pods go away as a kubelet would let them.
      src="$(go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/^\s*"Dir": "\(.*\)",\?$/\1/p')"
      for stage in node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease \
        pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete; do
        echo '---'
        cat "$src/kustomize/stage/$stage.yaml"
      done >"$kwok_out/.building/kwok-stages.yaml"
    )
    mv "$kwok_out/.building/kwok-stages.yaml" "$kwok_out/kwok-stages.yaml"
    mv "$kwok_out/.building/kwok" "$kwok_out/kwok"
    log "built kwok in $(since "$started")"
  fi
  ln -sfn "$kwok_out/kwok" "$out/kwok"
  ln -sfn "$kwok_out/kwok-stages.yaml" "$out/kwok-stages.yaml"
fi

log "cached in $out ($(du -shL "$out" | cut -f1))"
echo "$out"
