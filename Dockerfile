# The manager and the OpenSM it runs as its child ([opensm] driver = process), in one image.
#
#   docker build -t alternative-fabric-manager .
#   docker run -d --init --name alternative-fabric-manager --restart unless-stopped \
#     --network host --device /dev/infiniband \
#     -v /etc/alternative-fabric-manager:/etc/alternative-fabric-manager:ro \
#     -v afm_data:/var/lib/alternative-fabric-manager \
#     alternative-fabric-manager
#
# Operator commands run in the same container:
#   docker exec alternative-fabric-manager alternative-fabric-manager \
#     --config-file /etc/alternative-fabric-manager/afm.conf --confirm-switches

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Pure Go (the SQLite driver too): a static binary.
RUN CGO_ENABLED=0 go build -trimpath -o /out/alternative-fabric-manager ./cmd/alternative-fabric-manager

FROM debian:bookworm-slim
# opensm is the subnet manager the manager drives; infiniband-diags gives the
# tools the docs use to check the fabric (smpquery, saquery, ibnetdiscover).
RUN apt-get update \
 && apt-get install -y --no-install-recommends opensm infiniband-diags \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/alternative-fabric-manager /usr/local/bin/alternative-fabric-manager
COPY etc/afm.conf.sample /usr/share/doc/alternative-fabric-manager/afm.conf.sample
# The database (SQLite by default) and config_dir (opensm.conf, partitions.conf,
# OpenSM's log and subnet dump) live here.
VOLUME /var/lib/alternative-fabric-manager
# Ready: the database answers and, on the leader, OpenSM runs and the last apply did not fail
# (GET /readyz, asked by the binary itself: the image has no curl).
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s --retries=3 \
  CMD ["alternative-fabric-manager", "--config-file", "/etc/alternative-fabric-manager/afm.conf", "--healthcheck"]
ENTRYPOINT ["alternative-fabric-manager"]
CMD ["--config-file", "/etc/alternative-fabric-manager/afm.conf"]
