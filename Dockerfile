# syntax=docker/dockerfile:1
#
# dqnflow images. One static binary (CGO_ENABLED=0) on two run-time bases:
#
#   control  Debian slim: the control worker, `dqnflow migrate` and the CLI.
#   s3       Debian slim: versitygw, the S3-compatible checkpoint store of
#            docker-compose.yml (Apache-2.0), built from the Go module proxy
#            at the version tools/versitygw pins.
#   gpu      NVIDIA CUDA 13 runtime (Ubuntu 24.04): the GPU worker. The binary
#            opens libcuda (injected by the NVIDIA Container Toolkit), NVRTC
#            and cuBLAS/cuBLASLt (from this image) at run time with purego;
#            nothing CUDA is needed to build it.
#
#   docker build --target control -t dqnflow-control .
#   docker build --target gpu     -t dqnflow-gpu .
#
# docker-compose.yml builds both. Both run as the same non-root user
# (uid/gid 10001), so the shared checkpoint volume has one owner.

ARG GO_IMAGE=golang:1.26-bookworm
ARG CONTROL_BASE=debian:bookworm-slim
# A CUDA 13 *runtime* image: NVRTC and cuBLAS without the toolkit. CUDA 13
# needs an NVIDIA driver of the 580 series or newer on the host.
ARG CUDA_BASE=nvidia/cuda:13.0.2-runtime-ubuntu24.04

# ---- build: the static binary ----------------------------------------------
FROM ${GO_IMAGE} AS build
WORKDIR /src
ENV CGO_ENABLED=0
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -buildvcs=false -ldflags="-s -w" -o /out/dqnflow ./cmd/dqnflow

# ---- gpu: the GPU worker ---------------------------------------------------
FROM ${CUDA_BASE} AS gpu
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates tzdata \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 10001 dqnflow \
 && useradd --uid 10001 --gid 10001 --create-home --home-dir /home/dqnflow \
      --shell /usr/sbin/nologin dqnflow \
 && install -d -o 10001 -g 10001 /var/lib/dqnflow /var/lib/dqnflow/checkpoints
COPY --from=build /out/dqnflow /usr/local/bin/dqnflow
# compute gives the worker the driver's CUDA libraries, utility adds
# nvidia-smi for whoever debugs the box. Set here because a compose device
# reservation with only `capabilities: [gpu]` sets no driver capabilities.
ENV NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    DQNFLOW_CHECKPOINT_DIR=/var/lib/dqnflow/checkpoints
USER 10001:10001
WORKDIR /home/dqnflow
ENTRYPOINT ["/usr/local/bin/dqnflow"]
CMD ["worker", "--role", "gpu", "--device", "auto"]

# ---- s3: versitygw serving a directory (posix backend) ----------------------
FROM ${GO_IMAGE} AS s3-build
WORKDIR /src/tools/versitygw
ENV CGO_ENABLED=0
COPY tools/versitygw/ ./
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -buildvcs=false -ldflags="-s -w" -o /out/versitygw github.com/versity/versitygw/cmd/versitygw

FROM ${CONTROL_BASE} AS s3
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 10001 versitygw \
 && useradd --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin versitygw \
 && install -d -o 10001 -g 10001 /var/lib/versitygw /var/lib/versitygw/data /var/lib/versitygw/meta
COPY --from=s3-build /out/versitygw /usr/local/bin/versitygw
USER 10001:10001
# The root credentials come from ROOT_ACCESS_KEY_ID and
# ROOT_SECRET_ACCESS_KEY in the environment. Object metadata goes to a
# sidecar directory, so the data volume needs no extended attributes.
ENTRYPOINT ["/usr/local/bin/versitygw"]
CMD ["--port", ":7070", "posix", "--sidecar", "/var/lib/versitygw/meta", "/var/lib/versitygw/data"]

# ---- control: control worker, migrations, CLI (the default target) --------
FROM ${CONTROL_BASE} AS control
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates tzdata \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 10001 dqnflow \
 && useradd --uid 10001 --gid 10001 --create-home --home-dir /home/dqnflow \
      --shell /usr/sbin/nologin dqnflow \
 && install -d -o 10001 -g 10001 /var/lib/dqnflow /var/lib/dqnflow/checkpoints
COPY --from=build /out/dqnflow /usr/local/bin/dqnflow
ENV DQNFLOW_CHECKPOINT_DIR=/var/lib/dqnflow/checkpoints
USER 10001:10001
WORKDIR /home/dqnflow
ENTRYPOINT ["/usr/local/bin/dqnflow"]
CMD ["worker", "--role", "control"]
