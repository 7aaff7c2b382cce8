# janus-registration: the registration endpoint Janus nodes announce themselves to.
#
#   docker build -t janus-registration .
#   docker run --read-only -p 8443:8443 \
#     -v janus-state:/var/lib/janus-registration \
#     -v "$PWD/deploy-files/fleet:/etc/janus-registration/fleet:ro" \
#     -v "$PWD/deploy-files/tls:/etc/janus-registration/tls:ro" janus-registration
#
# The paths below are the documented defaults (docs/deploying.md); a test
# checks that the binary accepts this file's ENTRYPOINT, CMD and HEALTHCHECK.

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY crates ./crates
COPY state-example ./state-example
# The dist profile: fat LTO, one codegen unit (Cargo.toml; docs/performance.md).
# Only the product: the load generator (crates/bench) is a tool, not shipped.
RUN cargo build --profile dist --locked -p janus-registration
# The state directory, owned by the runtime's user: Docker seeds a fresh named
# volume from the image's directory, so the volume is writable by 65532 too.
RUN mkdir -p /out/state && chmod 0700 /out/state

# distroless/cc: glibc and libgcc, no shell, no package manager. The binary
# needs no system CA roots: it trusts only the fleet's root.
FROM gcr.io/distroless/cc-debian12:nonroot
# The crate's version (Cargo.toml); scripts/container-check.sh checks that the
# label and `janus-registration --version` agree.
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="janus-registration" \
      org.opencontainers.image.description="The protocol-2 registration endpoint Janus nodes announce themselves to" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="MIT" \
      org.opencontainers.image.documentation="docs/deploying.md" \
      org.opencontainers.image.base.name="gcr.io/distroless/cc-debian12:nonroot"
COPY --from=build /src/target/dist/janus-registration /usr/local/bin/janus-registration
COPY --from=build --chown=65532:65532 /out/state /var/lib/janus-registration
ENV JANUS_REGISTRATION_LISTEN=0.0.0.0:8443 \
    JANUS_REGISTRATION_FLEET=/etc/janus-registration/fleet \
    JANUS_REGISTRATION_CERT=/etc/janus-registration/tls/controller.crt \
    JANUS_REGISTRATION_KEY=/etc/janus-registration/tls/controller.key \
    JANUS_REGISTRATION_STATE=/var/lib/janus-registration \
    JANUS_REGISTRATION_LOG_FORMAT=json
# Any UID that owns the state volume works (OpenShift); this one is distroless' nonroot.
USER 65532:65532
VOLUME ["/var/lib/janus-registration"]
EXPOSE 8443
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=30s --timeout=5s --start-period=5s --retries=3 \
  CMD ["/usr/local/bin/janus-registration", "healthcheck", "--addr", "127.0.0.1:8443"]
ENTRYPOINT ["/usr/local/bin/janus-registration"]
CMD ["serve"]
