// Palette commands. Each forwards to one of the server's workspace/executeCommand
// names; edits come back as workspace/applyEdit, which the language client applies.
// Ids are `dllm-lsp.*` because the client itself registers the server's own
// `dllm.*` ids (used by its code actions) as VS Code commands.
import * as vscode from "vscode";
import { ExecuteCommandRequest, LanguageClient, State } from "vscode-languageclient/node";
import { EngineStatusBar } from "./statusBar";
import { EngineStatus, describeStatus } from "./statusFormat";

export interface CommandHost {
  client(): LanguageClient | undefined;
  statusBar: EngineStatusBar;
  output: vscode.LogOutputChannel;
  restartServer(): Promise<void>;
}

async function execute<T>(host: CommandHost, command: string, args: unknown[]): Promise<T | undefined> {
  const client = host.client();
  if (!client || client.state !== State.Running) {
    const choice = await vscode.window.showErrorMessage("dllm: the language server is not running.", "Show Logs");
    if (choice) {
      host.output.show();
    }
    return undefined;
  }
  try {
    return (await client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args })) as T;
  } catch (error) {
    host.output.error(`${command} failed: ${String(error)}`);
    void vscode.window.showErrorMessage(`dllm: ${command} failed: ${error instanceof Error ? error.message : String(error)}`);
    return undefined;
  }
}

export function registerCommands(context: vscode.ExtensionContext, host: CommandHost): void {
  const register = (id: string, run: () => Promise<unknown>) =>
    context.subscriptions.push(vscode.commands.registerCommand(id, run));

  register("dllm-lsp.regenerateSelection", async () => {
    const editor = vscode.window.activeTextEditor;
    const client = host.client();
    if (!editor || editor.selection.isEmpty || !client) {
      void vscode.window.showInformationMessage("dllm: select the code to regenerate first.");
      return;
    }
    const c2p = client.code2ProtocolConverter;
    await execute(host, "dllm.regenerateSelection", [c2p.asUri(editor.document.uri), c2p.asRange(editor.selection)]);
  });

  register("dllm-lsp.fillHoles", async () => {
    const editor = vscode.window.activeTextEditor;
    const client = host.client();
    if (!editor || !client) {
      return;
    }
    await execute(host, "dllm.fillHoles", [client.code2ProtocolConverter.asUri(editor.document.uri)]);
  });

  register("dllm-lsp.toggleCompletions", async () => {
    const result = await execute<{ enabled: boolean }>(host, "dllm.toggleCompletions", []);
    if (result) {
      void vscode.window.showInformationMessage(`dllm: completions ${result.enabled ? "enabled" : "disabled"}.`);
    }
  });

  register("dllm-lsp.restartEngine", async () => {
    await execute(host, "dllm.restartEngine", []);
  });

  register("dllm-lsp.showEngineStatus", async () => {
    const status = await execute<EngineStatus>(host, "dllm.engineStatus", []);
    if (status) {
      host.statusBar.update(status);
      const choice = await vscode.window.showInformationMessage(describeStatus(status), "Show Logs");
      if (choice) {
        host.output.show();
      }
    }
  });

  register("dllm-lsp.restartServer", () => host.restartServer());
  register("dllm-lsp.showLogs", async () => host.output.show());
}
