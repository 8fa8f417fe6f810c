#!/usr/bin/env bash
# The main job: install what is missing, build, and run `flashbob demo` (extra arguments pass through).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ensure_packages
configure_and_build
exec "$BUILD/bin/flashbob" demo "$@"
