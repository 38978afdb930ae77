// VS Code settings (`dllm.*`) to the server's initializationOptions, in the
// camelCase shape of the server's contract. The values are passed through,
// not interpreted: the server validates them and owns their meaning.

/** Reads one `dllm.` setting (WorkspaceConfiguration.get). */
export type SettingGetter = (key: string) => unknown;

/** Settings the client itself uses to launch the server: changing one restarts it. */
export const LAUNCH_SETTINGS = ["pythonPath", "serverArgs", "serverEnv"] as const;

export interface InitializationOptions {
  enable: unknown;
  engine: Record<string, unknown>;
  debounceMs: unknown;
  inlineCompletion: unknown;
  multiline: unknown;
  multilineMaxLines: unknown;
  emptyBody: unknown;
  prefetchNextLine: unknown;
  prepareAtCursor: unknown;
  lineMinTokenProb: unknown;
  multilineMinTokenProb: unknown;
  completion: unknown;
  diagnostics: unknown;
  context: Record<string, unknown>;
  languages: unknown;
  diffusion: Record<string, unknown>;
  fillMarker: unknown;
  nextEdit: Record<string, unknown>;
}

// Unset (null) values are left out: the server's default is the same, and a
// server older than this client does not warn about a key it does not know.
function pick(get: SettingGetter, prefix: string, keys: string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of keys) {
    const value = get(`${prefix}.${key}`);
    if (value !== null && value !== undefined) {
      out[key] = value;
    }
  }
  return out;
}

export function initializationOptions(get: SettingGetter): InitializationOptions {
  return {
    enable: get("enable"),
    engine: pick(get, "engine", ["mode", "model", "socket", "url", "token", "openaiModel"]),
    debounceMs: get("debounceMs"),
    inlineCompletion: get("inlineCompletion"),
    multiline: get("multiline"),
    multilineMaxLines: get("multilineMaxLines"),
    emptyBody: get("emptyBody"),
    prefetchNextLine: get("prefetchNextLine"),
    prepareAtCursor: get("prepareAtCursor"),
    lineMinTokenProb: get("lineMinTokenProb"),
    multilineMinTokenProb: get("multilineMinTokenProb"),
    completion: get("completion"),
    diagnostics: get("diagnostics"),
    context: pick(get, "context", ["prefixTokens", "suffixTokens", "snippetTokens", "nearTokens"]),
    languages: get("languages"),
    diffusion: pick(get, "diffusion", ["threshold", "temperature", "confidence", "seed", "maxPasses", "invokedCandidates"]),
    fillMarker: get("fillMarker"),
    nextEdit: pick(get, "nextEdit", ["enabled", "maxLines", "minConfidence", "debounceMs"]),
  };
}
