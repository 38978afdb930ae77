// Which Python runs `python -m dllm_lsp serve`. No vscode import here, so the
// order of discovery is unit-tested in plain Node (test/python.test.ts).
import { execFile } from "child_process";
import * as fs from "fs";
import * as path from "path";

export interface PythonSources {
  /** dllm.pythonPath; when set it is used as given (after variable expansion). */
  setting: string;
  /** The Python extension's interpreter for this workspace, if it is installed. */
  pythonExtension?: string;
  workspaceFolders: string[];
  env: NodeJS.ProcessEnv;
  platform: NodeJS.Platform;
}

export interface PythonCandidate {
  path: string;
  source: string;
}

export interface ResolvedPython extends PythonCandidate {
  /** Whether `import dllm_lsp` worked with it. */
  importable: boolean;
}

export function expandVariables(value: string, workspaceFolder: string | undefined, env: NodeJS.ProcessEnv): string {
  return value
    .replace(/\$\{workspaceFolder\}/g, workspaceFolder ?? "")
    .replace(/\$\{env:([^}]+)\}/g, (_, name: string) => env[name] ?? "")
    .replace(/^~(?=$|\/|\\)/, env.HOME ?? env.USERPROFILE ?? "~");
}

function venvPython(dir: string, platform: NodeJS.Platform): string {
  return platform === "win32" ? path.join(dir, "Scripts", "python.exe") : path.join(dir, "bin", "python");
}

/** Candidates in order: the setting alone if set; else the Python extension's
 * interpreter, .venv/venv in each workspace folder, $VIRTUAL_ENV, PATH. */
export function candidatePythons(
  src: PythonSources,
  exists: (p: string) => boolean = fs.existsSync,
): PythonCandidate[] {
  if (src.setting.trim()) {
    const expanded = expandVariables(src.setting.trim(), src.workspaceFolders[0], src.env);
    return [{ path: expanded, source: "setting dllm.pythonPath" }];
  }
  const found: PythonCandidate[] = [];
  if (src.pythonExtension) {
    found.push({ path: src.pythonExtension, source: "Python extension interpreter" });
  }
  for (const folder of src.workspaceFolders) {
    for (const name of [".venv", "venv"]) {
      const candidate = venvPython(path.join(folder, name), src.platform);
      if (exists(candidate)) {
        found.push({ path: candidate, source: `${name} in ${folder}` });
      }
    }
  }
  if (src.env.VIRTUAL_ENV) {
    const candidate = venvPython(src.env.VIRTUAL_ENV, src.platform);
    if (exists(candidate)) {
      found.push({ path: candidate, source: "$VIRTUAL_ENV" });
    }
  }
  for (const name of src.platform === "win32" ? ["python"] : ["python3", "python"]) {
    found.push({ path: name, source: "PATH" });
  }
  // The same interpreter found twice is probed once.
  return found.filter((c, i) => found.findIndex((d) => d.path === c.path) === i);
}

/** Whether `python -c "import dllm_lsp"` succeeds (dllm_lsp imports no torch, so this is quick). */
export function canImportDllm(python: string, env: NodeJS.ProcessEnv): Promise<boolean> {
  return new Promise((resolve) => {
    execFile(python, ["-c", "import dllm_lsp"], { env, timeout: 20000 }, (error) => resolve(!error));
  });
}

/** The first candidate that can import dllm_lsp; else the first candidate, marked not importable. */
export async function resolvePython(
  src: PythonSources,
  probe: (python: string) => Promise<boolean>,
  exists?: (p: string) => boolean,
): Promise<ResolvedPython> {
  const candidates = candidatePythons(src, exists);
  for (const candidate of candidates) {
    if (await probe(candidate.path)) {
      return { ...candidate, importable: true };
    }
  }
  return { ...candidates[0], importable: false };
}
