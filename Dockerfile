# The pysandboxes MCP server (pysandboxes mcp --http) as an image: built in one
# stage, run in another as a non-root user, without privileges. See
# docs/images.md.
#
#   docker build -t pysandboxes-mcp .
#   docker run --rm -p 127.0.0.1:8080:8080 \
#     -v "$PWD/token:/var/run/secrets/pysandboxes/token:ro" pysandboxes-mcp
#
# The OS provider is landlock: an unprivileged process confines itself, so the
# container needs no capability, no privileged mode and no seccomp change
# (a kernel with Landlock enabled, 5.13 or later, and a runtime whose default
# seccomp profile allows the landlock_* system calls). The namespace providers
# (unshare, bwrap) need user namespaces, which the default seccomp profiles of
# Docker and Kubernetes refuse to unprivileged containers; firejail needs a
# setuid binary. docs/images.md says what each would need.

ARG GO_VERSION=1.26
ARG DEBIAN=bookworm

FROM golang:${GO_VERSION}-${DEBIAN} AS build
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends libseccomp-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=1 go build -trimpath -buildvcs=false -o /out/pysandboxes ./cmd/pysandboxes

FROM debian:${DEBIAN}-slim
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends python3 libseccomp2 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --home-dir /tmp --shell /usr/sbin/nologin pysandboxes \
 && mkdir -p /etc/pysandboxes
COPY --from=build /out/pysandboxes /usr/local/bin/pysandboxes
COPY deploy/py-sandboxes /etc/pysandboxes/py-sandboxes
USER 10001:10001
ENV HOME=/tmp
EXPOSE 8080
# The token is read from a file (a mounted secret), never from the command line.
ENTRYPOINT ["/usr/local/bin/pysandboxes", "mcp", "--config", "/etc/pysandboxes/py-sandboxes", "--os-sandbox", "landlock", "--accept-unenforced", "files-meta", "--http", "0.0.0.0:8080", "--token-file", "/var/run/secrets/pysandboxes/token"]
