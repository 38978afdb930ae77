import assert from "node:assert/strict";
import { test } from "node:test";
import { candidatePythons, expandVariables, resolvePython } from "../src/python";

const base = { setting: "", workspaceFolders: ["/proj"], env: {}, platform: "linux" as const };

test("the setting wins alone, with variables expanded", () => {
  const found = candidatePythons({ ...base, setting: "${workspaceFolder}/.env/bin/python", pythonExtension: "/x/python" });
  assert.deepEqual(found, [{ path: "/proj/.env/bin/python", source: "setting dllm.pythonPath" }]);
});

test("order: Python extension, .venv, venv, $VIRTUAL_ENV, PATH", () => {
  const exists = (p: string) => ["/proj/.venv/bin/python", "/proj/venv/bin/python", "/ve/bin/python"].includes(p);
  const found = candidatePythons({ ...base, pythonExtension: "/ext/python", env: { VIRTUAL_ENV: "/ve" } }, exists);
  assert.deepEqual(
    found.map((c) => c.path),
    ["/ext/python", "/proj/.venv/bin/python", "/proj/venv/bin/python", "/ve/bin/python", "python3", "python"],
  );
});

test("missing environments are skipped and duplicates probed once", () => {
  const found = candidatePythons({ ...base, pythonExtension: "/proj/.venv/bin/python" }, (p) => p === "/proj/.venv/bin/python");
  assert.deepEqual(found.map((c) => c.path), ["/proj/.venv/bin/python", "python3", "python"]);
});

test("Windows layout", () => {
  const found = candidatePythons({ ...base, workspaceFolders: ["C:\\p"], platform: "win32" }, (p) => p.endsWith("python.exe"));
  assert.match(found[0].path, /\.venv[\\/]Scripts[\\/]python\.exe$/);
  assert.equal(found[found.length - 1].path, "python");
});

test("resolvePython takes the first that imports dllm_lsp, else reports the first", async () => {
  const exists = (p: string) => p === "/proj/.venv/bin/python";
  const ok = await resolvePython(base, async (p) => p === "python3", exists);
  assert.deepEqual(ok, { path: "python3", source: "PATH", importable: true });
  const none = await resolvePython(base, async () => false, exists);
  assert.deepEqual(none, { path: "/proj/.venv/bin/python", source: ".venv in /proj", importable: false });
});

test("expandVariables", () => {
  assert.equal(expandVariables("${env:HOME}/py", undefined, { HOME: "/h" }), "/h/py");
  assert.equal(expandVariables("~/py", undefined, { HOME: "/h" }), "/h/py");
});
