# The AgenticFix app on Node.js 22 LTS: multi-stage build, runs as a non-root user, listens on 0.0.0.0:3000.
# It talks to a Docker Engine through DOCKER_HOST or a mounted /var/run/docker.sock.
# Without a container registry: `bash scripts/node-image.sh` and --build-arg NODE_IMAGE=agenticfix/node:22;
# behind a TLS-inspecting proxy: --build-arg EXTRA_CA_CERTS="$(cat your-ca.crt)" (docs/operating.md: "Offline build").
ARG NODE_IMAGE=node:22-bookworm-slim
FROM ${NODE_IMAGE} AS build
WORKDIR /app
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ && rm -rf /var/lib/apt/lists/*
# Trusted by npm and native module downloads of this stage only; the image does not keep it.
ARG EXTRA_CA_CERTS=""
# An internal npm registry, when given.
ARG npm_config_registry
COPY package.json package-lock.json ./
# Dependencies before the sources, so a change of src/ reuses this layer.
RUN printf '%s\n' "$EXTRA_CA_CERTS" > /tmp/extra-ca.pem \
  && if [ -n "$EXTRA_CA_CERTS" ]; then export NODE_EXTRA_CA_CERTS=/tmp/extra-ca.pem; fi \
  && npm ci --ignore-scripts --no-audit --no-fund && npm rebuild better-sqlite3
COPY tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY src ./src
# The commit the image is built from (the context has no .git): `--build-arg GIT_COMMIT=$(git rev-parse HEAD)`.
ARG GIT_COMMIT=""
RUN npm run build && npm prune --omit=dev

FROM ${NODE_IMAGE}
# OCI labels. VERSION is package.json's (test/version.test.ts holds them equal: bump both in a release).
ARG VERSION=0.2.0
ARG GIT_COMMIT=""
ARG CREATED=""
LABEL org.opencontainers.image.title="AgenticFix" \
  org.opencontainers.image.description="A GitHub App that fixes labelled issues and opens verified draft pull requests." \
  org.opencontainers.image.version="${VERSION}" \
  org.opencontainers.image.revision="${GIT_COMMIT}" \
  org.opencontainers.image.created="${CREATED}" \
  org.opencontainers.image.licenses="MIT"
RUN apt-get update && apt-get install -y --no-install-recommends git ca-certificates && rm -rf /var/lib/apt/lists/* \
  && useradd --create-home --uid 10001 agenticfix
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json app.yml ./
COPY prompts ./prompts
COPY examples ./examples
# /data must be a host directory the Docker Engine also sees (docs/operating.md: "The app in a container").
ENV NODE_ENV=production HOST=0.0.0.0 PORT=3000 AGENTICFIX_HOME=/data AGENTICFIX_RUNS_DIR=/data/runs
RUN mkdir -p /data && chown agenticfix /data
USER agenticfix
EXPOSE 3000
CMD ["node", "dist/cli/index.js", "serve"]
