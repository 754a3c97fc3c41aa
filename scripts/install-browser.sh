#!/usr/bin/env bash
# Debian's Chromium (and ChromeDriver) for the GPU map's headless browser test (tests/descheduler/test_gpumap.py).
# Needs root (CI and these machines run as root); a no-op where /usr/bin/chromium exists.
set -euo pipefail
[ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ] && exit 0
echo "install-browser: apt-get install chromium chromium-driver" >&2
apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >&2
