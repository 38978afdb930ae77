import assert from "node:assert/strict";
import { test } from "node:test";
import { describeStatus, formatStatus } from "../src/statusFormat";

test("ready shows the model's short name and the latency", () => {
  const { text, tooltip } = formatStatus({ state: "ready", model: "/models/dream-coder-0.5b", lastLatencyMs: 41.6 });
  assert.equal(text, "$(sparkle) dream-coder-0.5b 42 ms");
  assert.match(tooltip, /engine: ready/);
  assert.match(tooltip, /model: \/models\/dream-coder-0.5b/);
});

test("other states name the state", () => {
  assert.equal(formatStatus({ state: "loading", model: "m", lastLatencyMs: null }).text, "$(loading~spin) dllm loading");
  assert.equal(formatStatus({ state: "error", model: "m", message: "CUDA OOM" }).text, "$(error) dllm error");
  assert.match(formatStatus({ state: "error", model: "m", message: "CUDA OOM" }).tooltip, /CUDA OOM/);
});

test("describeStatus", () => {
  assert.equal(
    describeStatus({ state: "ready", model: "m", lastLatencyMs: 10, message: null }),
    "dllm engine ready, model m, last latency 10 ms",
  );
});
