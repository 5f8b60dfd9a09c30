#!/usr/bin/env bash
# Builds labeller's OCI image without a container engine, for linux/amd64 and linux/arm64:
# `npm run build` (dist/), then per architecture the root filesystem of image/rootfs.sh as three
# layers (base, node, app), packed by go-containerregistry's crane (image/crane.sh) through a
# registry it serves in memory on loopback for the length of the build; image/assemble.ts then
# annotates the two images, indexes them and writes the SBOM. Writes:
#   image/out/oci             an OCI image layout holding the multi-architecture index (podman, skopeo
#                             and `crane push` take it; scripts/release.sh pushes it)
#   image/out/sbom.spdx.json  the SBOM (SPDX 2.3) of every layer of both images
#   image/out/sbom            the SBOM as an OCI artifact referring to the index
# and prints the layers and the compressed sizes.
#
#   image/build.sh                                   then, to publish it:
#   scripts/release.sh REGISTRY                      (the image, its SBOM and the chart)
#   LABELLER_IMAGE_ARCHES=amd64 image/build.sh       one architecture only (a quicker local build)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/image/out"
read -r -a arches <<<"${LABELLER_IMAGE_ARCHES:-amd64 arm64}"
version="$(node -p 'require(process.argv[1]).version' "$root/package.json")"
# The Node 24 that `npm install` brought, whatever the machine's own is (the scripts need no more
# than tsx, but run on what labeller runs on).
node="$root/node_modules/.bin/node"
[[ -x "$node" ]] || node=node
log() { echo "build.sh: $*" >&2; }

crane="${CRANE:-$(bash "$root/image/crane.sh")}"
rm -rf "$out"
mkdir -p "$out"
(cd "$root" && npm run --silent build -- --metafile "$out/metafile.json" >&2)

# Reproducible layers: sorted names, fixed times, root-owned (but for labeller's home).
layer() {
  local dir="$1" tarball="$2"
  (cd "$dir" && tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --exclude=./home/labeller -cf "$tarball" .)
  if [[ -d "$dir/home/labeller" ]]; then
    (cd "$dir" && tar --sort=name --mtime=@0 --owner=1000 --group=1000 --numeric-owner -rf "$tarball" ./home/labeller)
  fi
  gzip -n "$tarball"
}
for arch in "${arches[@]}"; do
  bash "$root/image/rootfs.sh" "$out/rootfs-$arch" "$arch"
  for name in base node app; do layer "$out/rootfs-$arch/$name" "$out/$name-$arch.tar"; done
done

# crane's append and mutate read and write registries: one in memory, on loopback, for this build.
port_file="$out/registry.log"
: >"$port_file" # before crane writes to it: the loop below may read it first
"$crane" registry serve --address 127.0.0.1:0 >"$port_file" 2>&1 &
registry_pid=$!
trap 'kill "$registry_pid" 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  port="$(sed -n 's/.*serving on port \([0-9]*\).*/\1/p' "$port_file" | head -n1)"
  [[ -n "$port" ]] && break
  sleep 0.1
done
[[ -n "${port:-}" ]] || { log "crane's registry did not start: $(cat "$port_file")"; exit 1; }

refs=()
for arch in "${arches[@]}"; do
  ref="127.0.0.1:$port/labeller:$version-$arch"
  "$crane" append --oci-empty-base --platform "linux/$arch" \
    -f "$out/base-$arch.tar.gz" -f "$out/node-$arch.tar.gz" -f "$out/app-$arch.tar.gz" -t "$ref" >&2
  # V8 flags that trade a little CPU for memory (bench/README.md, "Peak RSS"): a 1 MiB young
  # generation promotes less of the patch burst's garbage, and --optimize-for-size grows the old one
  # slowly. One malloc arena: V8's worker threads otherwise each keep an arena of mostly free
  # memory, about 6 MiB resident in all while converging. The Dockerfile says the same.
  "$crane" mutate "$ref" --set-platform "linux/$arch" \
    --entrypoint /usr/local/bin/node,--max-semi-space-size=1,--optimize-for-size,/app/dist/cli.js --user 1000:1000 --workdir /app \
    --env MALLOC_ARENA_MAX=1 \
    -l "org.opencontainers.image.title=labeller" -l "org.opencontainers.image.version=$version" \
    -l "org.opencontainers.image.licenses=Apache-2.0" -t "$ref" >&2
  refs+=("$ref")
done
"$crane" pull --format oci "${refs[@]}" "$out/oci" >&2

(cd "$root" && "$node" --import tsx image/assemble.ts "$out" "$out/metafile.json" "${arches[@]}")
rm -rf "$out"/*.tar.gz "$out"/rootfs-* "$out/metafile.json" "$port_file"
echo "image/out/oci; to publish it with its SBOM and the chart: scripts/release.sh REGISTRY"
