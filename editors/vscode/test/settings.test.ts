import assert from "node:assert/strict";
import { test } from "node:test";
import { initializationOptions } from "../src/settings";

test("settings map to the server's camelCase initializationOptions", () => {
  const values: Record<string, unknown> = {
    enable: true,
    "engine.mode": "daemon",
    "engine.socket": "/tmp/s",
    "engine.model": null,
    "diffusion.maxPasses": null,
    debounceMs: 50,
    inlineCompletion: true,
    multiline: "always",
    multilineMaxLines: 6,
    emptyBody: "any",
    prefetchNextLine: false,
    prepareAtCursor: false,
    lineMinTokenProb: 0.2,
    multilineMinTokenProb: 0.25,
    completion: false,
    diagnostics: true,
    "context.prefixTokens": 512,
    languages: { python: true, go: false },
    "diffusion.threshold": 0.8,
    "diffusion.seed": 3,
    "diffusion.invokedCandidates": 2,
    fillMarker: "TODO",
    "nextEdit.enabled": true,
    "nextEdit.minConfidence": 0.5,
  };
  const options = JSON.parse(JSON.stringify(initializationOptions((key) => values[key])));
  assert.deepEqual(options, {
    enable: true,
    engine: { mode: "daemon", socket: "/tmp/s" },
    debounceMs: 50,
    inlineCompletion: true,
    multiline: "always",
    multilineMaxLines: 6,
    emptyBody: "any",
    prefetchNextLine: false,
    prepareAtCursor: false,
    lineMinTokenProb: 0.2,
    multilineMinTokenProb: 0.25,
    completion: false,
    diagnostics: true,
    context: { prefixTokens: 512 },
    languages: { python: true, go: false },
    diffusion: { threshold: 0.8, seed: 3, invokedCandidates: 2 },
    fillMarker: "TODO",
    nextEdit: { enabled: true, minConfidence: 0.5 },
  });
});

test("every dllm.* server setting in package.json reaches the options", async () => {
  const pkg = await import("../package.json");
  const keys = Object.keys(pkg.contributes.configuration.properties)
    .map((k) => k.slice("dllm.".length))
    .filter((k) => !["pythonPath", "serverArgs", "serverEnv", "trace.server"].includes(k));
  const seen: string[] = [];
  initializationOptions((key) => {
    seen.push(key);
    return undefined;
  });
  assert.deepEqual([...seen].sort(), [...keys].sort());
});
