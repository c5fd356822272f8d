# rftpipe's container image, the one cmd/rftpipe/deploy/indexed-job.yaml
# runs. Build it with `make image` (docker build -t rftpipe:latest .).
# DuckDB is linked through cgo, so the build stage compiles with a C/C++
# toolchain and the runtime stage carries the C++ runtime it links against.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=
RUN CGO_ENABLED=1 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/rftpipe ./cmd/rftpipe

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates libstdc++6 \
	&& rm -rf /var/lib/apt/lists/*
COPY --from=build /out/rftpipe /usr/local/bin/rftpipe
USER 65532:65532
ENTRYPOINT ["rftpipe"]
