# syntax=docker/dockerfile:1
# Multi-stage build: a Go toolchain builds static binaries, and the final
# image holds only them (no shell, no package manager). The same image runs
# the service (default) and the load tester (entrypoint "loadtest").

FROM golang:1.26 AS build
WORKDIR /src
# Dependencies first, so editing the code does not re-download them.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ENV CGO_ENABLED=0
RUN go build -trimpath -ldflags="-s -w" -o /out/inventory ./cmd/inventory \
 && go build -trimpath -ldflags="-s -w" -o /out/loadtest ./loadtest

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/inventory /out/loadtest /usr/local/bin/
USER nonroot:nonroot
EXPOSE 8080
# A static image has no curl or wget: the binary checks its own /readyz.
HEALTHCHECK --interval=5s --timeout=3s --start-period=10s --retries=5 \
  CMD ["/usr/local/bin/inventory", "healthcheck", "http://127.0.0.1:8080/readyz"]
ENTRYPOINT ["/usr/local/bin/inventory"]
CMD ["serve"]
