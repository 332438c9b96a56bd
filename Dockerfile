# The manager, with OpenSM and infiniband-diags for [opensm] driver = process (OpenSM as the
# manager's child, in the same container), and the image OpenSM's own container runs with
# driver = managed. The README shows the docker run lines for each driver.
#
#   docker build --build-arg VERSION=1.2.3 --build-arg COMMIT="$(git rev-parse HEAD)" \
#     -t alternative-fabric-manager .
#
# make release (scripts/release.sh) builds it with each base image pinned by digest: GOLANG_IMAGE and
# DEBIAN_IMAGE become name@sha256:<digest> (or the local image's ID), and the labels
# org.opencontainers.image.base.* record them. The binary it builds is byte-identical to the release's
# linux/amd64 one (the same flags; scripts/release-test.sh compares them).

ARG GOLANG_IMAGE=golang:1.26-bookworm
ARG DEBIAN_IMAGE=debian:bookworm-slim

FROM ${GOLANG_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
ARG DATE=unknown
# Pure Go (the SQLite driver too): a static binary, with no build path or time in it.
RUN CGO_ENABLED=0 GOAMD64=v1 go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT} -X main.date=${DATE}" \
      -o /out/alternative-fabric-manager ./cmd/alternative-fabric-manager \
 && /out/alternative-fabric-manager --version

FROM ${DEBIAN_IMAGE}
# opensm is the subnet manager the manager drives; infiniband-diags gives the
# tools the docs use to check the fabric (smpquery, saquery, ibnetdiscover).
RUN apt-get update \
 && apt-get install -y --no-install-recommends opensm infiniband-diags \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/alternative-fabric-manager /usr/local/bin/alternative-fabric-manager
COPY etc/afm.conf.sample /usr/share/doc/alternative-fabric-manager/afm.conf.sample
ARG VERSION=dev
ARG COMMIT=unknown
ARG DATE=unknown
ARG DEBIAN_IMAGE
LABEL org.opencontainers.image.title="alternative-fabric-manager" \
      org.opencontainers.image.description="InfiniBand fabric manager for OpenStack networking-mlnx, driving OpenSM" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}" \
      org.opencontainers.image.created="${DATE}" \
      org.opencontainers.image.base.name="${DEBIAN_IMAGE}"
# The database (SQLite by default) and config_dir (opensm.conf, partitions.conf,
# OpenSM's log and subnet dump) live here.
VOLUME /var/lib/alternative-fabric-manager
# Ready: the database answers and, on the leader, OpenSM runs and the last apply did not fail
# (GET /readyz, asked by the binary itself: the image has no curl).
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s --retries=3 \
  CMD ["alternative-fabric-manager", "--config-file", "/etc/alternative-fabric-manager/afm.conf", "--healthcheck"]
ENTRYPOINT ["alternative-fabric-manager"]
CMD ["--config-file", "/etc/alternative-fabric-manager/afm.conf"]
