#!/usr/bin/env bash
# Install what the VS Code end-to-end test needs (tests/editors/test_vscode_e2e.py):
# Debian's Chromium plus the native build tools code-server compiles against,
# then code-server and playwright-core into editors/vscode/e2e/node_modules.
# Heavy: about 3-4 minutes and ~620 MB on a 2-core machine. Idempotent.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
start=$(date +%s)

if ! command -v chromium >/dev/null || ! dpkg -s libxkbfile-dev >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    build-essential pkg-config libkrb5-dev libx11-dev libxkbfile-dev libsecret-1-dev \
    chromium fonts-dejavu-core
fi
echo "apt: $(( $(date +%s) - start )) s" >&2

node_bin="$("$here/scripts/node24.sh")"
export PATH="$node_bin:$PATH"
# The native modules must build against Node 24's headers, not the system Node's
# (this machine's npm config points nodedir at /usr).
export npm_config_nodedir="$(dirname "$node_bin")"

cd "$here/e2e"
if [ ! -x node_modules/.bin/code-server ]; then
  npm ci --no-audit --no-fund  # package.json allowScripts lets code-server build its native modules
fi
echo "setup-e2e done in $(( $(date +%s) - start )) s" >&2
