#!/usr/bin/env bash
# Install headless Chromium and its WebDriver from the distribution's packages for the browser tests
# (tests/browser/), unless they are already there. Debian: chromium + chromium-driver (Ubuntu's chromium is a snap:
# there, install Google Chrome and a matching chromedriver by hand). Needs root and apt-get; progress on stderr.
source "$(dirname "$0")/help.sh"  # -h, --help: the comment above
set -euo pipefail
log() { echo "ci_chromium: $*" >&2; }
if command -v chromedriver >/dev/null 2>&1 && { command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; }; then
    log "chromium and chromedriver are installed"; exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    log "no chromium/chromedriver and no root apt-get: install chromium and chromium-driver; the browser tests need them"
    exit 1
fi
start=$(date +%s)
log "installing chromium and chromium-driver with apt-get"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends chromium chromium-driver fonts-dejavu-core >&2
log "installed in $(( $(date +%s) - start )) s"
