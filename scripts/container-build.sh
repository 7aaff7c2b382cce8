#!/usr/bin/env bash
# Builds the image from the Dockerfile, online or offline: with Docker where
# an engine runs, else Podman (installed from Debian and configured where
# missing); where the registries FROM names cannot be reached, it first makes
# local stand-ins under those names from Debian packages and says so
# (scripts/lib/container-engine.sh; docs/deploying.md "The container image").
# The crates still come from crates.io (or the mirror cargo is configured with).
#
#   scripts/container-build.sh [TAG]     default: janus-registration:VERSION
set -euo pipefail
cd "$(dirname "$0")/.."
SCRIPT_NAME=container-build
# shellcheck source=lib/container-engine.sh
source scripts/lib/container-engine.sh

engine_pick
image_build "${1:-janus-registration:$(crate_version)}"
