#!/usr/bin/env bash
# Builds labeller's OCI image without a container engine: `npm run build` (dist/), the root
# filesystem of image/rootfs.sh as three layers (base, node, app), packed by go-containerregistry's
# crane (image/crane.sh) through a registry it serves in memory on loopback for the length of
# the build. Writes image/out/oci (an OCI image layout, which `crane push` and podman take) and
# prints the layers and the compressed size.
#
#   image/build.sh                                   then, to publish it:
#   crane push image/out/oci REGISTRY/labeller:TAG
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/image/out"
version="$(node -p 'require(process.argv[1]).version' "$root/package.json")"
log() { echo "build.sh: $*" >&2; }

crane="${CRANE:-$(bash "$root/image/crane.sh")}"
(cd "$root" && npm run --silent build >&2)
rm -rf "$out"
mkdir -p "$out"
bash "$root/image/rootfs.sh" "$out/layers"

# Reproducible layers: sorted names, fixed times, root-owned (but for labeller's home).
layer() {
  local name="$1"
  (cd "$out/layers/$name" && tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --exclude=./home/labeller -cf "$out/$name.tar" .)
  if [[ -d "$out/layers/$name/home/labeller" ]]; then
    (cd "$out/layers/$name" && tar --sort=name --mtime=@0 --owner=1000 --group=1000 --numeric-owner -rf "$out/$name.tar" ./home/labeller)
  fi
  gzip -n "$out/$name.tar"
}
for name in base node app; do layer "$name"; done
rm -rf "$out/layers"

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
ref="127.0.0.1:$port/labeller:$version"

"$crane" append --oci-empty-base --platform linux/amd64 -f "$out/base.tar.gz" -f "$out/node.tar.gz" -f "$out/app.tar.gz" -t "$ref" >&2
# V8 flags that trade a little CPU for memory (bench/README.md, "Peak RSS"): a 1 MiB young
# generation promotes less of the patch burst's garbage, and --optimize-for-size grows the old one
# slowly. One malloc arena: V8's worker threads otherwise each keep an arena of mostly free
# memory, about 6 MiB resident in all while converging. The Dockerfile says the same.
"$crane" mutate "$ref" --set-platform linux/amd64 \
  --entrypoint /usr/local/bin/node,--max-semi-space-size=1,--optimize-for-size,/app/dist/cli.js --user 1000:1000 --workdir /app \
  --env MALLOC_ARENA_MAX=1 \
  -l "org.opencontainers.image.title=labeller" -l "org.opencontainers.image.version=$version" \
  -l "org.opencontainers.image.licenses=Apache-2.0" -t "$ref" >&2
"$crane" pull --format oci "$ref" "$out/oci" >&2
"$crane" manifest "$ref" >"$out/manifest.json"
"$crane" config "$ref" >"$out/config.json"
rm -f "$out"/*.tar.gz "$port_file"

node - "$out/manifest.json" <<'JS'
const { layers } = JSON.parse(require('node:fs').readFileSync(process.argv[2], 'utf8'));
const mib = (n) => `${(n / 1024 / 1024).toFixed(1)} MiB`;
['base: glibc, libstdc++, CA certificates, passwd', 'node: /usr/local/bin/node', 'app: /app (dist/)'].forEach((what, i) =>
  console.log(`layer ${i + 1} ${mib(layers[i].size)}  ${what}  ${layers[i].digest.slice(0, 19)}`));
console.log(`image: ${mib(layers.reduce((sum, l) => sum + l.size, 0))} compressed, ${layers.length} layers`);
JS
echo "image/out/oci; to publish it: $crane push image/out/oci REGISTRY/labeller:$version"
