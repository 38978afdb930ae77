#!/usr/bin/env bash
# Build the VS Code extension offline: npm ci, type-check (tsc), unit tests
# (node --test), bundle (esbuild) and package (vsce) into editors/vscode/dllm-lsp.vsix.
# vsce needs Node >= 22; scripts/node24.sh provides one when the system Node is older.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
export PATH="$(scripts/node24.sh):$PATH"
npm ci --no-audit --no-fund --loglevel=error
npx tsc --noEmit -p .
npm run -s test:unit
npx esbuild src/extension.ts --bundle --outfile=out/extension.js --platform=node --format=cjs \
  --target=node20 --external:vscode --minify --log-level=warning
# No repository field yet (the project's public URL is not decided): allow it missing.
npx vsce package --no-dependencies --allow-missing-repository --out dllm-lsp.vsix
echo "built $(pwd)/dllm-lsp.vsix in $(( $(date +%s) - start )) s" >&2
