# One image per service: docker build --build-arg SERVICE=curator -t archivist/curator .
FROM golang:1.26 AS build
ARG SERVICE
ARG VERSION=dev
WORKDIR /src
COPY . .
ENV CGO_ENABLED=0 GOTOOLCHAIN=local
RUN go build -trimpath -ldflags "-s -w -X github.com/archivist/archivist/pkg/service.Version=${VERSION}" \
    -o /out/service ./services/${SERVICE}
# The directories a service writes, owned by the user it runs as: a named
# volume mounted on /blobs takes this ownership when it is first made.
RUN mkdir -p /out/blobs /out/ingest /out/keys /out/cache

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/service /service
COPY --from=build --chown=65532:65532 /out/blobs /blobs
COPY --from=build --chown=65532:65532 /out/ingest /var/lib/archivist/ingest
COPY --from=build --chown=65532:65532 /out/keys /etc/archivist/keys
COPY --from=build --chown=65532:65532 /out/cache /var/cache/archivist
USER nonroot:nonroot
EXPOSE 9090
ENTRYPOINT ["/service"]
