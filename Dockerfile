# Two images from one file:
#   farm         every service but the kind worker (sim workers, Flower, the CLI)
#   kind-worker  farm + the kind, helm and docker CLIs a kind worker drives through the host's
#                Docker socket (docker compose --profile kind builds it)
# The base is pinned to a Debian release so that its packages (kubectl) do not move under us.
FROM python:3.11-slim-bookworm AS farm
RUN apt-get update && apt-get install -y --no-install-recommends kubernetes-client bubblewrap ca-certificates \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md ./
COPY core core
COPY apps apps
COPY farm farm
COPY tasks tasks
COPY injectors injectors
COPY clusters clusters
COPY results results
COPY examples examples
RUN pip install --no-cache-dir .
ENV LITELLM_LOCAL_MODEL_COST_MAP=True
CMD ["farm", "--help"]

# kind and helm are not packaged by Debian, and bookworm's docker.io (20.10, API 1.41) is older
# than current Docker Engines accept (29 and later refuse clients below API 1.44): all three are
# upstream release binaries, pinned by version and sha256, so a changed download stops the build.
FROM debian:bookworm-slim AS kind-tools
ARG TARGETARCH=amd64
ARG KIND_VERSION=v0.23.0
ARG KIND_SHA256_AMD64=1d86e3069ffbe3da9f1a918618aecbc778e00c75f838882d0dfa2d363bc4a68c
ARG KIND_SHA256_ARM64=a416d6c311882337f0e56910e4a2e1f8c106ec70c22cbf0ac1dd8f33c1e284fe
ARG HELM_VERSION=v3.16.2
ARG HELM_SHA256_AMD64=9318379b847e333460d33d291d4c088156299a26cd93d570a7f5d0c36e50b5bb
ARG HELM_SHA256_ARM64=1888301aeb7d08a03b6d9f4d2b73dcd09b89c41577e80e3455c113629fc657a4
ARG DOCKER_VERSION=27.5.1
ARG DOCKER_SHA256_AMD64=4f798b3ee1e0140eab5bf30b0edc4e84f4cdb53255a429dc3bbae9524845d640
ARG DOCKER_SHA256_ARM64=e6b53725a73763ab3f988c73f8772eaed429754c1a579db5ff11f21990fd1817
RUN apt-get update && apt-get install -y --no-install-recommends curl ca-certificates \
    && rm -rf /var/lib/apt/lists/*
RUN set -eu; \
    case "$TARGETARCH" in \
      amd64) docker_arch=x86_64; kind_sha=$KIND_SHA256_AMD64; helm_sha=$HELM_SHA256_AMD64; docker_sha=$DOCKER_SHA256_AMD64 ;; \
      arm64) docker_arch=aarch64; kind_sha=$KIND_SHA256_ARM64; helm_sha=$HELM_SHA256_ARM64; docker_sha=$DOCKER_SHA256_ARM64 ;; \
      *) echo "no pinned kind/helm/docker checksums for architecture '$TARGETARCH'" >&2; exit 1 ;; \
    esac; \
    mkdir -p /out /tmp/dl; cd /tmp/dl; \
    curl -fsSLo kind "https://github.com/kubernetes-sigs/kind/releases/download/${KIND_VERSION}/kind-linux-${TARGETARCH}"; \
    echo "$kind_sha  kind" | sha256sum -c -; \
    install -m 0755 kind /out/kind; \
    curl -fsSLo helm.tar.gz "https://get.helm.sh/helm-${HELM_VERSION}-linux-${TARGETARCH}.tar.gz"; \
    echo "$helm_sha  helm.tar.gz" | sha256sum -c -; \
    tar -xzf helm.tar.gz "linux-${TARGETARCH}/helm"; \
    install -m 0755 "linux-${TARGETARCH}/helm" /out/helm; \
    curl -fsSLo docker.tgz "https://download.docker.com/linux/static/stable/${docker_arch}/docker-${DOCKER_VERSION}.tgz"; \
    echo "$docker_sha  docker.tgz" | sha256sum -c -; \
    tar -xzf docker.tgz docker/docker; \
    install -m 0755 docker/docker /out/docker; \
    rm -rf /tmp/dl

FROM farm AS kind-worker
COPY --from=kind-tools /out/kind /out/helm /out/docker /usr/local/bin/
# Fails the build if a binary does not run here (wrong architecture, missing loader).
RUN kind version && helm version --short && docker --version
