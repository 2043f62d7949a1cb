# One image per service: docker build --build-arg SERVICE=curator -t archivist/curator .
FROM golang:1.26 AS build
ARG SERVICE
ARG VERSION=dev
WORKDIR /src
COPY . .
ENV CGO_ENABLED=0 GOTOOLCHAIN=local
RUN go build -trimpath -ldflags "-s -w -X github.com/archivist/archivist/pkg/service.Version=${VERSION}" \
    -o /out/service ./services/${SERVICE}

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/service /service
USER nonroot:nonroot
EXPOSE 9090
ENTRYPOINT ["/service"]
