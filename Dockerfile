# syntax=docker/dockerfile:1
# One image per service: docker build --build-arg SERVICE=curator -t archivist/curator .
FROM golang:1.26 AS build
ARG SERVICE
ARG VERSION=dev
WORKDIR /src
# Each service builds as its own module (its go.mod's replace lines name
# the modules of this repository it uses), so the workspace's other modules
# (k8s, examples, tools) are not part of the context (.dockerignore).
ENV CGO_ENABLED=0 GOTOOLCHAIN=local GOWORK=off
# The modules first: this layer, the slow one, is reused until a go.mod or
# go.sum changes, not at every change of a source file.
COPY events/go.mod events/go.sum events/
COPY pkg/go.mod pkg/go.sum pkg/
COPY devkit/go.mod devkit/go.sum devkit/
COPY services/aggregator/go.mod services/aggregator/go.sum services/aggregator/
COPY services/archivist/go.mod services/archivist/go.sum services/archivist/
COPY services/auditor/go.mod services/auditor/go.sum services/auditor/
COPY services/curator/go.mod services/curator/go.sum services/curator/
COPY services/cwa/go.mod services/cwa/go.sum services/cwa/
COPY services/dashboard/go.mod services/dashboard/go.sum services/dashboard/
COPY services/indexer/go.mod services/indexer/go.sum services/indexer/
COPY services/pwa/go.mod services/pwa/go.sum services/pwa/
COPY services/researcher/go.mod services/researcher/go.sum services/researcher/
RUN cd services/${SERVICE} && go mod download
# The indexer and the CLI inflate WARC members with libdeflate, linked
# statically (scripts/build-service).
RUN case "${SERVICE}" in indexer|archivist) \
      apt-get update && apt-get install -y --no-install-recommends libdeflate-dev && rm -rf /var/lib/apt/lists/* ;; \
    esac
COPY . .
RUN --mount=type=cache,target=/root/.cache/go-build \
    ARCHIVIST_LIBDEFLATE=$(case "${SERVICE}" in indexer|archivist) echo 1 ;; *) echo 0 ;; esac) \
    scripts/build-service "${SERVICE}" /out/service "${VERSION}"
# The directories a service writes, owned by the user it runs as: a named
# volume mounted on /blobs takes this ownership when it is first made.
RUN mkdir -p /out/blobs /out/ingest /out/keys /out/operator /out/cache

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/service /service
COPY --from=build --chown=65532:65532 /out/blobs /blobs
COPY --from=build --chown=65532:65532 /out/ingest /var/lib/archivist/ingest
COPY --from=build --chown=65532:65532 /out/keys /etc/archivist/keys
COPY --from=build --chown=65532:65532 /out/operator /etc/archivist/operator
COPY --from=build --chown=65532:65532 /out/cache /var/cache/archivist
USER nonroot:nonroot
EXPOSE 9090
ENTRYPOINT ["/service"]
