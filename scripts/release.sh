#!/usr/bin/env bash
# Publishes a release to an OCI registry, and does nothing else (no build, no tag, no npm):
#   REGISTRY/labeller:VERSION         the image index image/build.sh wrote (linux/amd64, linux/arm64)
#   its SBOM                          as an artifact whose subject is that index (OCI referrers; on
#                                     registries without the referrers API, under the fallback tag
#                                     sha256-<index digest>)
#   REGISTRY/charts/labeller:VERSION  the Helm chart (`helm package`, `helm push`), whose image
#                                     defaults to REGISTRY/labeller@<that index's digest> (and
#                                     its artifacthub.io/images annotation names it)
# so that `helm install labeller oci://REGISTRY/charts/labeller --version VERSION` runs exactly
# the image pushed with it. Run image/build.sh first, from the same commit (checked).
# Credentials are crane's (`crane auth login`, or docker's config) and helm's (`helm registry login`).
#
#   scripts/release.sh [--plain-http] REGISTRY
#     REGISTRY      oci://host[:port]/path or host[:port]/path, e.g. ghcr.io/you
#     --plain-http  the registry speaks HTTP, not HTTPS (a local test registry)
#   CRANE, HELM     the tools to use; default: image/crane.sh's crane, helm on PATH
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
log() { echo "release.sh: $*" >&2; }
fail() { log "$*"; exit 1; }
usage() { log "usage: scripts/release.sh [--plain-http] REGISTRY (oci://host/path or host/path)"; exit 2; }

plain_http=false
registry=""
for arg in "$@"; do
  case "$arg" in
    --plain-http) plain_http=true ;;
    -*) usage ;;
    *) [[ -z "$registry" ]] || usage; registry="$arg" ;;
  esac
done
[[ -n "$registry" ]] || usage
registry="${registry#oci://}"
registry="${registry%/}"
[[ "$registry" =~ ^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._/-]+)?$ ]] ||
  fail "$registry: not a registry: host[:port][/path], lowercase, e.g. ghcr.io/you"

crane="${CRANE:-$(bash "$root/image/crane.sh")}"
helm="${HELM:-helm}"
command -v "$helm" >/dev/null || fail "no helm on PATH (or set HELM)"
node="$root/node_modules/.bin/node"
[[ -x "$node" ]] || node=node
# field FILE EXPR: EXPR of the JSON document d in FILE.
field() { "$node" -p "const d = JSON.parse(require('fs').readFileSync(process.argv[1], 'utf8')); $2" "$1"; }

# What is released: the package's version, which the chart and the image must carry too.
version="$(field "$root/package.json" d.version)"
chart_version="$(sed -n 's/^version: *//p' "$root/chart/Chart.yaml")"
app_version="$(sed -n 's/^appVersion: *"*\([^"]*\)"*$/\1/p' "$root/chart/Chart.yaml")"
[[ "$chart_version" == "$version" && "$app_version" == "$version" ]] ||
  fail "chart/Chart.yaml has version $chart_version, appVersion $app_version; package.json has $version: keep them in step"

layout="$root/image/out/oci"
[[ -f "$layout/index.json" && -f "$root/image/out/sbom/index.json" ]] || fail "no image/out/oci: run image/build.sh first"
index="$(field "$layout/index.json" 'd.manifests[0].digest')"
annotated="$layout/blobs/sha256/${index#sha256:}"
built_version="$(field "$annotated" "d.annotations['org.opencontainers.image.version']")"
built_from="$(field "$annotated" "d.annotations['org.opencontainers.image.revision'] ?? ''")"
head="$(git -C "$root" rev-parse HEAD 2>/dev/null || true)"
[[ "$built_version" == "$version" ]] || fail "image/out holds $built_version, not $version: run image/build.sh"
[[ -z "$head" || "$built_from" == "$head" ]] || fail "image/out was built from ${built_from:-no commit}, this is $head: run image/build.sh"

insecure=()
helm_http=()
if [[ "$plain_http" == true ]]; then insecure=(--insecure) helm_http=(--plain-http); fi

# The image index, then its SBOM (pushed by digest: it is found through its subject, not a tag).
image="$registry/labeller"
pushed="$("$crane" "${insecure[@]}" push "$layout" "$image:$version")"
[[ "$pushed" == "$image@$index" ]] || fail "crane pushed $pushed, expected $image@$index"
log "image $image:$version = $index"
sbom="$(field "$root/image/out/sbom/index.json" 'd.manifests[0].digest')"
"$crane" "${insecure[@]}" push "$root/image/out/sbom" "$image@$sbom" >/dev/null
log "SBOM $image@$sbom (subject $index)"

# The chart, its image pinned to the index just pushed; its README regenerated to say so.
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp -r "$root/chart" "$work/labeller"
values="$work/labeller/values.yaml"
sed -i -e "s|^  repository: .*|  repository: $image|" -e "s|^  digest: \"\"|  digest: \"$index\"|" "$values"
grep -qx "  repository: $image" "$values" && grep -qx "  digest: \"$index\"" "$values" ||
  fail "chart/values.yaml: no image.repository and image.digest lines to set"
# Artifact Hub's list of the chart's images (Chart.yaml's artifacthub.io/images): that one, by digest.
meta="$work/labeller/Chart.yaml"
sed -i -e "s|^      image: .*|      image: $image@$index|" "$meta"
[[ "$(grep -c '^      image: ' "$meta")" == 1 ]] && grep -qx "      image: $image@$index" "$meta" ||
  fail "chart/Chart.yaml: no artifacthub.io/images entry to set"
(cd "$root" && "$node" --import tsx scripts/chartdocs.ts --chart "$work/labeller" >&2)
"$helm" package "$work/labeller" --destination "$work" >&2
chart="oci://$registry/charts"
"$helm" push "$work/labeller-$version.tgz" "$chart" "${helm_http[@]}" >&2
log "chart $chart/labeller:$version"

# For scripts: what was pushed, one per line.
echo "image $image:$version@$index"
echo "sbom $image@$sbom"
echo "chart $chart/labeller:$version"
