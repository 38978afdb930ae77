// The interpreter chosen in the Python extension (ms-python.python), if it is
// installed. Its API has changed over time, so both shapes are tried and any
// failure means "no answer" rather than an error.
import * as vscode from "vscode";

interface PythonApi {
  environments?: { getActiveEnvironmentPath?(resource?: vscode.Uri): { path: string } | undefined };
  settings?: { getExecutionDetails?(resource?: vscode.Uri): { execCommand?: string[] } };
}

export async function pythonExtensionInterpreter(resource?: vscode.Uri): Promise<string | undefined> {
  const extension = vscode.extensions.getExtension<PythonApi>("ms-python.python");
  if (!extension) {
    return undefined;
  }
  try {
    const api = extension.isActive ? extension.exports : await extension.activate();
    const active = api?.environments?.getActiveEnvironmentPath?.(resource)?.path;
    if (active) {
      return active;
    }
    return api?.settings?.getExecutionDetails?.(resource)?.execCommand?.[0];
  } catch {
    return undefined;
  }
}
