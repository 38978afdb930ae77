// dllm-lsp for VS Code: starts `python -m dllm_lsp serve` over stdio and lets
// vscode-languageclient wire up what the server advertises: ghost text (LSP
// inline completion), the suggest widget, code actions, diagnostics, applyEdit.
// This file only launches, restarts, forwards settings and where the cursor rests; all
// logic is the server's.
import * as vscode from "vscode";
import {
  DidChangeConfigurationNotification,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  State,
} from "vscode-languageclient/node";
import { registerCommands } from "./commands";
import { CursorRest, Place } from "./cursorRest";
import { canImportDllm, resolvePython } from "./python";
import { pythonExtensionInterpreter } from "./pythonExtension";
import { NextEdits } from "./nextEdit";
import { LAUNCH_SETTINGS, initializationOptions } from "./settings";
import { EngineStatusBar } from "./statusBar";
import { EngineStatus } from "./statusFormat";

const LANGUAGES = ["python", "javascript", "javascriptreact", "typescript", "typescriptreact", "go", "rust", "c", "cpp", "java"];
const SELECTOR = LANGUAGES.flatMap((language) => [
  { scheme: "file", language },
  { scheme: "untitled", language },
]);

let client: LanguageClient | undefined;
let output: vscode.LogOutputChannel;
let statusBar: EngineStatusBar;
let nextEdits: NextEdits;

function settings(): vscode.WorkspaceConfiguration {
  return vscode.workspace.getConfiguration("dllm");
}

function serverOptionsFromSettings() {
  const config = settings();
  return initializationOptions((key) => config.get(key));
}

async function startClient(): Promise<void> {
  const config = settings();
  const folders = (vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.fsPath);
  const env = { ...process.env, ...config.get<Record<string, string>>("serverEnv", {}) };
  const python = await resolvePython(
    {
      setting: config.get<string>("pythonPath", ""),
      pythonExtension: await pythonExtensionInterpreter(vscode.workspace.workspaceFolders?.[0]?.uri),
      workspaceFolders: folders,
      env,
      platform: process.platform,
    },
    (candidate) => canImportDllm(candidate, env),
  );
  output.info(`python: ${python.path} (${python.source}), dllm_lsp importable: ${python.importable}`);
  if (!python.importable) {
    statusBar.show("$(error) dllm not installed", `${python.path} cannot import dllm_lsp`);
    const choice = await vscode.window.showErrorMessage(
      `dllm: ${python.path} (${python.source}) cannot import dllm_lsp. Install dllm-lsp there or set dllm.pythonPath.`,
      "Open Settings",
      "Show Logs",
    );
    if (choice === "Open Settings") {
      void vscode.commands.executeCommand("workbench.action.openSettings", "dllm.pythonPath");
    } else if (choice === "Show Logs") {
      output.show();
    }
    return;
  }

  const serverOptions: ServerOptions = {
    command: python.path,
    args: ["-m", "dllm_lsp", "serve", ...config.get<string[]>("serverArgs", [])],
    // No `transport`: with TransportKind.stdio the client appends `--stdio`,
    // which `dllm-lsp serve` does not take; stdio is the default anyway.
    options: { env, cwd: folders[0] },
  };
  const clientOptions: LanguageClientOptions = {
    documentSelector: SELECTOR,
    initializationOptions: serverOptionsFromSettings(),
    outputChannel: output,
    traceOutputChannel: output,
    middleware: {
      // The server also offers a next edit as an inline item on its line; the decoration shows it.
      provideInlineCompletionItems: async (document, position, context, token, next) =>
        nextEdits.filterInline(document, await next(document, position, context, token)),
    },
  };
  client = new LanguageClient("dllm", "dllm", serverOptions, clientOptions);
  client.onNotification("dllm/status", (status: EngineStatus) => statusBar.update(status));
  client.onDidChangeState(({ newState }) => {
    if (newState === State.Stopped) {
      statusBar.show("$(debug-disconnect) dllm stopped", "The dllm language server stopped: see Output > dllm.");
    }
  });
  try {
    await client.start();
    output.info("language server started");
  } catch (error) {
    statusBar.show("$(error) dllm", `the language server failed to start: ${String(error)}`);
    output.error(`the language server failed to start: ${String(error)}`);
  }
}

async function stopClient(): Promise<void> {
  const running = client;
  client = undefined;
  if (running) {
    await running.dispose(2000).catch((error: unknown) => output.warn(`stopping the server: ${String(error)}`));
  }
}

async function restartServer(): Promise<void> {
  await stopClient();
  await startClient();
}

// Where the cursor rests after a click or a cursor key, the server encodes the context a
// completion there would carry (cursorRest.ts decides what a rest is). The server owns the
// rest: `prepareAtCursor` (off for an OpenAI endpoint), stale versions, cancelling.
function watchCursorRests(): vscode.Disposable {
  const rests = new CursorRest((place) => {
    const running = client;
    if (!running || running.state !== State.Running || !settings().get<boolean>("enable", true)) {
      return false;
    }
    void running.sendNotification("dllm/prepareCompletion", {
      textDocument: { uri: place.uri, version: place.version },
      position: { line: place.line, character: place.character },
    });
    return true;
  });
  const placeOf = (editor: vscode.TextEditor): Place | undefined => {
    const document = editor.document;
    if (vscode.languages.match(SELECTOR, document) === 0) {
      return undefined;
    }
    const { line, character } = editor.selection.active;
    // The URI as the client sent it in didOpen: it has no uriConverters, so uri.toString().
    return { uri: document.uri.toString(), version: document.version, line, character };
  };
  return vscode.Disposable.from(
    rests,
    vscode.window.onDidChangeTextEditorSelection((e) => {
      const place = placeOf(e.textEditor);
      if (place) {
        rests.moved(e.kind, e.selections, place);
      } else {
        rests.cancel();
      }
    }),
    vscode.window.onDidChangeActiveTextEditor((editor) => {
      const place = editor && placeOf(editor);
      if (editor && place) {
        rests.focused(editor.selections, place);
      } else {
        rests.cancel();
      }
    }),
  );
}

async function onConfigurationChanged(event: vscode.ConfigurationChangeEvent): Promise<void> {
  if (!event.affectsConfiguration("dllm")) {
    return;
  }
  if (LAUNCH_SETTINGS.some((key) => event.affectsConfiguration(`dllm.${key}`)) || !client) {
    await restartServer();
    return;
  }
  // Same shape as initializationOptions, under the section the server reads.
  await client.sendNotification(DidChangeConfigurationNotification.type, {
    settings: { dllm: serverOptionsFromSettings() },
  });
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  output = vscode.window.createOutputChannel("dllm", { log: true });
  statusBar = new EngineStatusBar();
  nextEdits = new NextEdits({
    client: () => client,
    output,
    selector: SELECTOR,
    autoRequest: () => settings().get<boolean>("enable", true) && settings().get<boolean>("nextEdit.enabled", false),
  });
  context.subscriptions.push(output, statusBar, nextEdits, watchCursorRests());
  registerCommands(context, { client: () => client, statusBar, output, restartServer });
  context.subscriptions.push(vscode.workspace.onDidChangeConfiguration((e) => void onConfigurationChanged(e)));
  await startClient();
}

export async function deactivate(): Promise<void> {
  await stopClient();
}
