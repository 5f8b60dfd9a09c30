#!/usr/bin/env bash
# Builds the peers of `bench/run.ts --peers` (bench/README.md, "Peers") from the crate registry,
# the Go module proxy and the npm registry (and the Node floor, its types stripped by esbuild), and caches each outside the repository in
# ${LABELLER_CACHE_DIR:-~/.cache/labeller}/peers/<name>-<hash of its sources and toolchain>, so a
# second run with the same sources is a no-op. Prints one line per peer: its name and the command
# that runs it (a binary, or `node main.js`). Cargo's target folder is shared between builds
# (peers/cargo-target), so a change to main.rs does not rebuild the crates under it.
#
#   bash bench/peers/build.sh [kube-rs] [controller-runtime] [client-node] [node-floor]   (default: all four)
#   LABELLER_BUILD_JOBS=2 (default): cargo's -j
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cache="${LABELLER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/labeller}/peers"
jobs="${LABELLER_BUILD_JOBS:-2}"
mkdir -p "$cache"

log() { echo "build.sh: $*" >&2; }
need() { command -v "$1" >/dev/null || { log "no $1 on PATH: $2"; exit 3; }; }

# The peer's committed sources (never target/ or node_modules/), this script and `toolchain`.
key() {
  local name="$1" toolchain="$2"
  (
    cd "$here/$name"
    find . -type f -not -path './target/*' -not -path './node_modules/*' -print0 | sort -z | xargs -0 sha256sum
    sha256sum "$here/build.sh" | cut -d' ' -f1
    echo "$toolchain"
  ) | sha256sum | cut -c1-12
}

# Builds `name` into $cache/<name>-<key> with `build <folder>` unless it is there; prints the folder.
cached() {
  local name="$1" toolchain="$2" build="$3"
  local out
  out="$cache/$name-$(key "$name" "$toolchain")"
  if [[ ! -e "$out/.built" ]]; then
    log "building the $name peer ($toolchain)"
    rm -rf "$out.partial"
    mkdir -p "$out.partial"
    local started=$SECONDS
    "$build" "$out.partial"
    touch "$out.partial/.built"
    rm -rf "$out"
    mv "$out.partial" "$out"
    log "$name built in $((SECONDS - started)) s, cached in $out"
    # Builds of older sources are not run again.
    find "$cache" -mindepth 1 -maxdepth 1 -name "$name-*" -not -path "$out" -exec rm -rf {} +
  fi
  echo "$out"
}

build_kube_rs() {
  cargo build --release --locked -j "$jobs" --manifest-path "$here/kube-rs/Cargo.toml" \
    --target-dir "$cache/cargo-target" >&2
  cp "$cache/cargo-target/release/labeller-peer-kube-rs" "$1/"
}

build_controller_runtime() {
  (cd "$here/controller-runtime" && CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=readonly \
    go build -trimpath -ldflags "-s -w" -o "$1/labeller-peer-controller-runtime" .) >&2
}

build_node_floor() {
  "$repo/node_modules/.bin/esbuild" "$here/node-floor/main.ts" --format=esm --platform=node --target=node22 \
    --outfile="$1/main.js" --log-level=warning >&2
}

build_client_node() {
  cp "$here/client-node/package.json" "$here/client-node/package-lock.json" "$1/"
  (cd "$1" && npm ci --omit=dev --no-audit --no-fund --ignore-scripts) >&2
  # Types stripped to JavaScript, one file for one file, as tsc would emit it (no bundle).
  "$repo/node_modules/.bin/esbuild" "$here/client-node/main.ts" --format=esm --platform=node --target=node22 \
    --outfile="$1/main.js" --log-level=warning >&2
}

peers=("$@")
[[ ${#peers[@]} -gt 0 ]] || peers=(kube-rs controller-runtime client-node node-floor)
for peer in "${peers[@]}"; do
  case "$peer" in
    kube-rs)
      need cargo 'install Rust (rustup) to build the kube-rs peer'
      echo "kube-rs $(cached kube-rs "$(rustc --version)" build_kube_rs)/labeller-peer-kube-rs"
      ;;
    controller-runtime)
      need go 'install Go to build the controller-runtime peer'
      echo "controller-runtime $(cached controller-runtime "$(go version)" build_controller_runtime)/labeller-peer-controller-runtime"
      ;;
    client-node)
      need npm 'install Node and npm to build the client-node peer'
      [[ -x "$repo/node_modules/.bin/esbuild" ]] || { log "no esbuild: run npm install in $repo first"; exit 3; }
      echo "client-node node $(cached client-node "npm $(npm --version 2>/dev/null)" build_client_node)/main.js"
      ;;
    node-floor)
      [[ -x "$repo/node_modules/.bin/esbuild" ]] || { log "no esbuild: run npm install in $repo first"; exit 3; }
      echo "node-floor node $(cached node-floor "esbuild $("$repo/node_modules/.bin/esbuild" --version)" build_node_floor)/main.js"
      ;;
    *) log "unknown peer $peer (expected kube-rs, controller-runtime, client-node or node-floor)"; exit 2 ;;
  esac
done
