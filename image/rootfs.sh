#!/usr/bin/env bash
# Assembles labeller's image for one architecture as three root-filesystem folders, one per image
# layer, the way distroless images are made: no shell, no package manager, nothing but what Node needs.
#   base/  glibc, libstdc++, libgcc and CA certificates from Debian's packages of ARCH (`ldd` on the
#          Node binary names the libraries), /etc/passwd and /etc/group with labeller = uid/gid
#          1000 (image/rootfs/etc), /tmp, and the packages' dpkg records so that image scanners
#          know what is inside
#   node/  /usr/local/bin/node: the Node binary of the npm package node-linux-<x64|arm64>
#          (pinned), stripped
#   app/   /app: package.json (ES modules, the version), LICENSE and dist/ (`npm run build` first)
# and, beside them, node-package.json (the Node package's manifest: its version and licence, for
# the SBOM). image/build.sh packs them with crane; the Dockerfile runs this script in its build stage.
#
# The Debian packages come through apt, from Debian's archive (whatever distribution the machine
# runs) with a package index of our own in the cache, for ARCH: no `dpkg --add-architecture`, no
# root, and the machine's own apt state is left alone. Both architectures come from the same
# fresh index, at the same versions. Checked with Debian's archive keyring (debian-archive-keyring).
#
#   image/rootfs.sh OUT_DIR [ARCH]   (OUT_DIR/base, OUT_DIR/node, OUT_DIR/app; replaced)
#                                    ARCH: amd64 or arm64, Debian's names; default: this machine's
#   LABELLER_DEBIAN_MIRROR, LABELLER_DEBIAN_SECURITY_MIRROR   other mirrors of Debian's archive
set -euo pipefail

NODE_VERSION="${LABELLER_IMAGE_NODE_VERSION:-24.21.0}"
# glibc 2.36; Node 24 needs 2.28 or newer.
DEBIAN_SUITE=bookworm
MIRROR="${LABELLER_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SECURITY_MIRROR="${LABELLER_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
PACKAGES=(libc6 libgcc-s1 libstdc++6 ca-certificates base-files)
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:?usage: image/rootfs.sh OUT_DIR [amd64|arm64]}"
arch="${2:-$(dpkg --print-architecture)}"
cache_root="${LABELLER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/labeller}"
log() { echo "rootfs.sh: $*" >&2; }

case "$arch" in
  amd64) triplet=x86_64-linux-gnu node_arch=x64 ;;
  arm64) triplet=aarch64-linux-gnu node_arch=arm64 ;;
  *) log "unknown architecture $arch: amd64 or arm64"; exit 2 ;;
esac
[[ -f "$root/dist/cli.js" ]] || { log "no dist/cli.js: run \`npm run build\` first"; exit 2; }
strip="$triplet-strip"
for tool in apt-get dpkg-deb npm sha256sum "$strip"; do
  command -v "$tool" >/dev/null || {
    log "needs $tool on PATH (Debian, Ubuntu: apt-get install dpkg binutils binutils-${triplet//_/-}, and npm)"
    exit 2
  }
done
[[ -f "$KEYRING" ]] || { log "needs Debian's archive keyring $KEYRING (apt-get install debian-archive-keyring)"; exit 2; }

rm -rf "$out"
mkdir -p "$out/base" "$out/node/usr/local/bin" "$out/app/app"

# base: the Debian packages of $arch, each downloaded once into the cache (checked by its hash).
apt_dir="$cache_root/image/apt-$arch"
debs="$cache_root/image/debs"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/archives/partial" "$apt_dir/empty" "$debs"
: >>"$apt_dir/status"
cat >"$apt_dir/sources.list" <<EOF
deb [signed-by=$KEYRING] $MIRROR $DEBIAN_SUITE main
deb [signed-by=$KEYRING] $MIRROR $DEBIAN_SUITE-updates main
deb [signed-by=$KEYRING] $SECURITY_MIRROR $DEBIAN_SUITE-security main
EOF
apt_options=(
  -o "APT::Architecture=$arch" -o "APT::Architectures=$arch"
  -o "Dir::State=$apt_dir" -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::State::status=$apt_dir/status"
  -o "Dir::Cache=$apt_dir" -o "APT::Sandbox::User=$(id -un)"
  -o "Dir::Etc::SourceList=$apt_dir/sources.list" -o "Dir::Etc::SourceParts=$apt_dir/empty"
  -o "Dir::Etc::Preferences=/dev/null" -o "Dir::Etc::PreferencesParts=$apt_dir/empty"
)
# A fresh index each build (seconds when nothing changed): the image takes the current security fixes.
apt-get "${apt_options[@]}" -qq update >&2
# 'URI' file size SHA256:hash, one line per package (from a folder without .debs: apt leaves out
# the packages whose file is already in the current folder).
mapfile -t uris < <(cd "$apt_dir" && apt-get "${apt_options[@]}" download --print-uris "${PACKAGES[@]}")
[[ "${#uris[@]}" == "${#PACKAGES[@]}" ]] || { log "apt found ${#uris[@]} of ${PACKAGES[*]} for $arch"; exit 1; }
sha256() { sha256sum "$1" | cut -d' ' -f1; }
base="$out/base"
mkdir -p "$base/var/lib/dpkg/status.d"
for line in "${uris[@]}"; do
  read -r _ file _ hash <<<"$line"
  deb="$debs/$file"
  if [[ ! -f "$deb" || "$(sha256 "$deb")" != "${hash#SHA256:}" ]]; then
    rm -f "$deb"
    (cd "$debs" && apt-get "${apt_options[@]}" -qq download "${file%%_*}" >&2)
    [[ -f "$deb" && "$(sha256 "$deb")" == "${hash#SHA256:}" ]] || { log "$file: not downloaded, or not the index's SHA-256"; exit 1; }
  fi
  pkg="$(dpkg-deb -f "$deb" Package)"
  log "$pkg $(dpkg-deb -f "$deb" Version) $arch"
  if [[ "$pkg" == base-files ]]; then
    # Only what says which Debian this is (scanners read it); the rest is for a full system.
    mkdir -p "$out/base-files"
    dpkg-deb -x "$deb" "$out/base-files"
    mkdir -p "$base/etc" "$base/usr/lib"
    cp "$out/base-files/usr/lib/os-release" "$base/usr/lib/os-release"
    ln -sf ../usr/lib/os-release "$base/etc/os-release"
    rm -rf "$out/base-files"
  else
    dpkg-deb -x "$deb" "$base"
  fi
  dpkg-deb -f "$deb" > "$base/var/lib/dpkg/status.d/$pkg"
done
# What ca-certificates' maintainer script would generate; no shell runs in the image to do it.
mkdir -p "$base/etc/ssl/certs"
cat "$base"/usr/share/ca-certificates/mozilla/*.crt > "$base/etc/ssl/certs/ca-certificates.crt"
rm -rf "$base/usr/sbin" "$base/etc/ca-certificates.conf"
# Manuals, translations, debugger scripts and iconv's charset modules (half of glibc; Node
# converts with its own ICU) go; each package's copyright file stays, as its licence asks.
find "$base/usr/share/doc" -mindepth 2 ! -name copyright ! -type d -delete
rm -rf "$base"/usr/share/{man,info,lintian,locale,gcc,gdb} "$base/usr/lib/$triplet/gconv"
cp "$root/image/rootfs/etc/passwd" "$root/image/rootfs/etc/group" "$base/etc/"
mkdir -p "$base/tmp" "$base/home/labeller"
chmod 1777 "$base/tmp"
# image/build.sh's tar sets owners itself; the Dockerfile's COPY keeps these.
if [[ "$(id -u)" == 0 ]]; then chown 1000:1000 "$base/home/labeller"; fi

# node: from the npm registry (or npm's cache), once per version and architecture.
node_name="node-linux-$node_arch"
node_pkg="$cache_root/image/$node_name-$NODE_VERSION.tgz"
if [[ ! -f "$node_pkg" ]]; then
  tmp="$(mktemp -d)"
  (cd "$tmp" && npm pack --silent "$node_name@$NODE_VERSION" >/dev/null)
  mv "$tmp/$node_name-$NODE_VERSION.tgz" "$node_pkg"
  rm -rf "$tmp"
fi
tar -xzf "$node_pkg" -C "$out/node" package/bin/node package/LICENSE package/package.json
# Symbols and debug info are a sixth of the binary; V8 symbolizes JavaScript stacks itself.
"$strip" -o "$out/node/usr/local/bin/node" "$out/node/package/bin/node"
mkdir -p "$out/node/usr/local/share/doc/node"
mv "$out/node/package/LICENSE" "$out/node/usr/local/share/doc/node/LICENSE"
mv "$out/node/package/package.json" "$out/node-package.json"
rm -rf "$out/node/package"
log "node $NODE_VERSION $arch"

# app: what dist/ needs at run time ("type": "module", the version), labeller's licence, dist/.
cp "$root/package.json" "$root/LICENSE" "$out/app/app/"
cp -r "$root/dist" "$out/app/app/dist"
