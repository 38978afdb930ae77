// The status-bar item: fed by the server's `dllm/status` notification and by
// the results of the engine-status and toggle commands.
import * as vscode from "vscode";
import { EngineStatus, formatStatus } from "./statusFormat";

export class EngineStatusBar implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem("dllm.status", vscode.StatusBarAlignment.Right, 100);
  last: EngineStatus | undefined;

  constructor() {
    this.item.name = "dllm";
    this.item.command = "dllm-lsp.showEngineStatus";
    this.show("$(loading~spin) dllm starting", "dllm-lsp: starting the language server");
  }

  update(status: EngineStatus): void {
    this.last = status;
    const { text, tooltip } = formatStatus(status);
    this.item.backgroundColor =
      status.state === "error" ? new vscode.ThemeColor("statusBarItem.errorBackground") : undefined;
    this.show(text, tooltip);
  }

  /** For client-side states the server cannot report (not installed, stopped). */
  show(text: string, tooltip: string): void {
    this.item.text = text;
    this.item.tooltip = tooltip;
    this.item.show();
  }

  dispose(): void {
    this.item.dispose();
  }
}
