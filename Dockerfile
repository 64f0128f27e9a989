# The AgenticFix app: multi-stage build, runs as a non-root user, listens on 0.0.0.0:3000.
# It talks to a Docker Engine through DOCKER_HOST or a mounted /var/run/docker.sock.
FROM node:20-bookworm-slim AS build
WORKDIR /app
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY src ./src
RUN npm ci && npm prune --omit=dev

FROM node:20-bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends git ca-certificates && rm -rf /var/lib/apt/lists/* \
  && useradd --create-home --uid 10001 agenticfix
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json app.yml ./
COPY prompts ./prompts
COPY examples ./examples
# /data must be a host directory the Docker Engine also sees (README: "The app in a container").
ENV NODE_ENV=production HOST=0.0.0.0 PORT=3000 AGENTICFIX_HOME=/data AGENTICFIX_RUNS_DIR=/data/runs
RUN mkdir -p /data && chown agenticfix /data
USER agenticfix
EXPOSE 3000
CMD ["node", "dist/cli/index.js", "serve"]
