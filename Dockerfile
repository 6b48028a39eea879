# syntax=docker/dockerfile:1
# probed's container image: one static binary on an empty base.
#
#   docker build --build-arg VERSION=$(bash hack/version.sh) \
#                --build-arg REVISION=$(git rev-parse HEAD) \
#                --build-arg BUILD_DATE=$(TZ=UTC git log -1 --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd) \
#                -t probed:dev .
#
# The adoption webhook's image (docs/webhook.md) is the target "webhook":
#
#   docker build --target webhook ... -t probed-webhook:dev .
#
# Where there is no Docker engine (CI, the test machines), hack/build-probed-image.sh
# assembles the same image with umoci and skopeo (`make image`). Keep the two
# in step: binary flags, user, entrypoint, env and labels.

# The Go release, pinned to the patch: go.mod's toolchain line names the same
# one (pkg/version's TestToolchainPinned holds the two together). 1.26.8 has
# the crypto/tls and encoding/asn1 fixes; raise both when a newer patch fixes
# something probed reaches.
ARG GO_VERSION=1.26.8

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS=linux
ARG TARGETARCH
ARG VERSION=v0.0.0-dev
ARG REVISION=unknown
ARG BUILD_DATE=unknown
WORKDIR /src
# Modules first: this layer is reused until go.mod or go.sum change. Then
# every source directory the commands import (test/release's
# TestDockerfileBuildStageCompiles builds exactly what these COPY lines and
# .dockerignore let in).
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY cmd/ cmd/
COPY internal/ internal/
COPY pkg/ pkg/
COPY internal/ internal/
# probed compares the cluster's probe-reach policy with deploy/'s.
COPY deploy/embed.go deploy/probe-reach.yaml deploy/
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath \
      -ldflags "-s -w -X github.com/probed-dev/probed/pkg/version.Version=${VERSION} -X github.com/probed-dev/probed/pkg/version.Revision=${REVISION} -X github.com/probed-dev/probed/pkg/version.BuildDate=${BUILD_DATE}" \
      -o /out/probed ./cmd/probed && \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath \
      -ldflags "-s -w -X github.com/probed-dev/probed/pkg/version.Version=${VERSION} -X github.com/probed-dev/probed/pkg/version.Revision=${REVISION} -X github.com/probed-dev/probed/pkg/version.BuildDate=${BUILD_DATE}" \
      -o /out/probed-webhook ./cmd/probed-webhook

FROM scratch AS webhook
ARG VERSION=v0.0.0-dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="probed-webhook" \
      org.opencontainers.image.description="probed's adoption webhook" \
      org.opencontainers.image.source="https://github.com/probed-dev/probed" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/probed-webhook /probed-webhook
USER 65532:65532
ENTRYPOINT ["/probed-webhook"]

# The default target, last: probed itself.
FROM scratch
ARG VERSION=v0.0.0-dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="probed" \
      org.opencontainers.image.description="Node-side Kubernetes probing daemon" \
      org.opencontainers.image.source="https://github.com/probed-dev/probed" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/probed /probed
# Non-root by default. The DaemonSet runs it as UID 0, with every capability
# but KILL dropped, only because the runtime socket is root-owned (0660).
USER 65532:65532
ENTRYPOINT ["/probed"]
