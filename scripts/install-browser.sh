#!/usr/bin/env bash
# Install Debian's Chromium for the dashboard's browser tests (tests/ui): Playwright drives /usr/bin/chromium, so no
# browser is downloaded at test time. The Makefile's pytest target runs this only when /usr/bin/chromium is missing.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
  SUDO="sudo"
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium
/usr/bin/chromium --version
