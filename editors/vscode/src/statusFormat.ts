// The text of the status-bar item for a `dllm/status` object. No vscode import
// (unit-tested in test/statusFormat.test.ts).

export interface EngineStatus {
  state: "loading" | "ready" | "error" | "disabled" | string;
  model?: string | null;
  lastLatencyMs?: number | null;
  message?: string | null;
}

const ICONS: Record<string, string> = {
  loading: "$(loading~spin)",
  ready: "$(sparkle)",
  error: "$(error)",
  disabled: "$(circle-slash)",
};

function shortModel(model: string | null | undefined): string {
  if (!model) {
    return "";
  }
  const parts = model.split(/[\\/]/).filter(Boolean);
  return parts[parts.length - 1] ?? model;
}

export function formatStatus(status: EngineStatus): { text: string; tooltip: string } {
  const icon = ICONS[status.state] ?? "$(question)";
  const latency = typeof status.lastLatencyMs === "number" ? `${Math.round(status.lastLatencyMs)} ms` : "";
  const label = status.state === "ready" ? shortModel(status.model) || "dllm" : `dllm ${status.state}`;
  const text = [icon, label, latency].filter(Boolean).join(" ");
  const tooltip = [
    `dllm-lsp engine: ${status.state}`,
    `model: ${status.model ?? "(default)"}`,
    `last latency: ${latency || "-"}`,
    status.message ? `\n${status.message}` : "",
    "\nClick for the engine status.",
  ].join("\n");
  return { text, tooltip };
}

export function describeStatus(status: EngineStatus): string {
  const latency = typeof status.lastLatencyMs === "number" ? `, last latency ${Math.round(status.lastLatencyMs)} ms` : "";
  const message = status.message ? ` (${status.message})` : "";
  return `dllm engine ${status.state}, model ${status.model ?? "(default)"}${latency}${message}`;
}
