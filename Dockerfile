# draview operator image: `draview run` as a non-root user on a read-only root filesystem.
#   docker build -t draview:0.1.0 .
# Stage 1 builds draview's own wheel; the final stage installs its dependencies at the
# pinned, hashed versions of requirements.lock (wheels only: nothing is compiled), then
# the wheel from a bind mount, so two builds of one commit hold the same packages and the
# image holds neither build tools nor wheel files.
ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator/ operator/
RUN pip wheel --no-deps --wheel-dir /wheels .

FROM ${PYTHON_IMAGE}
ARG UID=65532
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
LABEL org.opencontainers.image.title="draview" \
      org.opencontainers.image.description="Continuous, exact availability of DRA devices in Kubernetes" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN --mount=type=bind,source=requirements.lock,target=/tmp/requirements.lock \
    --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --require-hashes --only-binary=:all: -r /tmp/requirements.lock \
    && pip install --no-deps --no-index /wheels/draview-*.whl \
    && groupadd --system --gid "${UID}" draview \
    && useradd --system --uid "${UID}" --gid "${UID}" --no-create-home \
       --home-dir /nonexistent --shell /usr/sbin/nologin draview
WORKDIR /
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["draview", "run"]
