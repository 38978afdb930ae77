// Next-edit suggestions from the server's `dllm/nextEdit`, shown as a diff decoration:
// the text an edit replaces struck through, the new text right after it. Tab accepts
// (one editor.edit, then `dllm/acceptEdit`), Esc rejects (`dllm/rejectEdit`), and Tab
// first jumps to a proposal that is off-screen. Why not VS Code's own inline-edit view:
// the stable API shows an inline completion item only as ghost text at the cursor (see
// README.md). Every decision is the server's; this file asks, draws and applies.
import * as vscode from "vscode";
import { CancellationTokenSource, LanguageClient, State } from "vscode-languageclient/node";
import { VersionedProposals, WireEdit, afterText, duplicatesProposal, editLines, hoverDiff, isOffscreen } from "./nextEditView";

const NEXT_EDIT = "dllm/nextEdit";
// The server waits `nextEdit.debounceMs` after the last keystroke before it asks the
// engine, and `dllm/nextEdit` joins that pending computation: the client only has to
// coalesce a burst of changes (auto-closed brackets, multi-cursor) into one request.
const COALESCE_MS = 30;
const SHOWN = "dllm.nextEditShown";
const OFFSCREEN = "dllm.nextEditOffscreen";

interface Proposal {
  version: number;
  edits: WireEdit[];
  ranges: vscode.Range[];
}

export interface NextEditHost {
  client(): LanguageClient | undefined;
  output: vscode.LogOutputChannel;
  selector: vscode.DocumentSelector;
  /** `dllm.nextEdit.enabled`: ask after each change (the explicit command always asks). */
  autoRequest(): boolean;
}

export class NextEdits implements vscode.Disposable {
  private readonly proposals = new VersionedProposals<Proposal>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly inflight = new Map<string, CancellationTokenSource>();
  private readonly oldText = vscode.window.createTextEditorDecorationType({
    textDecoration: "line-through",
    color: new vscode.ThemeColor("gitDecoration.deletedResourceForeground"),
    backgroundColor: new vscode.ThemeColor("diffEditor.removedTextBackground"),
    overviewRulerColor: new vscode.ThemeColor("editorOverviewRuler.modifiedForeground"),
    overviewRulerLane: vscode.OverviewRulerLane.Center,
    rangeBehavior: vscode.DecorationRangeBehavior.ClosedClosed,
  });
  private readonly newText = vscode.window.createTextEditorDecorationType({
    after: {
      backgroundColor: new vscode.ThemeColor("diffEditor.insertedTextBackground"),
      border: "1px solid",
      borderColor: new vscode.ThemeColor("diffEditor.insertedLineBackground"),
      margin: "0 0 0 0.15em",
    },
  });
  private offscreenMessage: vscode.Disposable | undefined;
  private readonly disposables: vscode.Disposable[] = [this.oldText, this.newText];

  constructor(private readonly host: NextEditHost) {
    const on = (d: vscode.Disposable) => this.disposables.push(d);
    on(vscode.workspace.onDidChangeTextDocument((e) => this.changed(e)));
    on(vscode.workspace.onDidCloseTextDocument((d) => this.forget(d.uri.toString())));
    on(vscode.window.onDidChangeVisibleTextEditors(() => this.redrawAll()));
    on(vscode.window.onDidChangeActiveTextEditor(() => this.updateContext()));
    on(vscode.window.onDidChangeTextEditorVisibleRanges((e) => {
      if (e.textEditor === vscode.window.activeTextEditor) {
        this.updateContext();
      }
    }));
    const command = (id: string, run: () => unknown) => on(vscode.commands.registerCommand(id, run));
    command("dllm-lsp.nextEdit", () => this.askNow());
    command("dllm-lsp.acceptNextEdit", () => this.accept());
    command("dllm-lsp.rejectNextEdit", () => this.reject());
    command("dllm-lsp.jumpToNextEdit", () => this.jump());
  }

  /** The proposal for this document's current version; a stale one is never returned. */
  shown(document: vscode.TextDocument): Proposal | undefined {
    return this.proposals.current(document.uri.toString(), document.version)?.value;
  }

  /** Middleware for inline completion: drop items that only repeat the proposal drawn. */
  filterInline<T extends vscode.InlineCompletionItem[] | vscode.InlineCompletionList | null | undefined>(
    document: vscode.TextDocument,
    result: T,
  ): T {
    const proposal = this.shown(document);
    if (!proposal || !result) {
      return result;
    }
    const keep = (item: vscode.InlineCompletionItem) =>
      !duplicatesProposal(item.range && this.wire(item.range), proposal.edits);
    if (Array.isArray(result)) {
      return result.filter(keep) as T;
    }
    const list = result as vscode.InlineCompletionList;
    list.items = list.items.filter(keep);
    return result;
  }

  private wire(range: vscode.Range) {
    const p = (x: vscode.Position) => ({ line: x.line, character: x.character });
    return { start: p(range.start), end: p(range.end) };
  }

  // ------------------------------------------------------------------ asking

  private changed(event: vscode.TextDocumentChangeEvent): void {
    if (event.contentChanges.length === 0) {
      return; // only the dirty state changed
    }
    const uri = event.document.uri.toString();
    this.clear(uri);
    this.cancel(uri);
    if (!this.host.autoRequest() || vscode.languages.match(this.host.selector, event.document) === 0) {
      return;
    }
    this.timers.set(uri, setTimeout(() => {
      this.timers.delete(uri);
      const editor = vscode.window.visibleTextEditors.find((e) => e.document === event.document);
      if (editor) {
        void this.request(editor.document, editor.selection.active);
      }
    }, COALESCE_MS));
  }

  private cancel(uri: string): void {
    clearTimeout(this.timers.get(uri));
    this.timers.delete(uri);
    this.inflight.get(uri)?.cancel();
    this.inflight.delete(uri);
  }

  private async askNow(): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    if (!editor) {
      return;
    }
    const edits = await this.request(editor.document, editor.selection.active);
    if (edits && edits.length === 0) {
      vscode.window.setStatusBarMessage("dllm: no next edit to suggest here", 4000);
    }
  }

  /** Ask for the next edit of the document's current version; undefined when no answer
   *  counts (no server, an error, cancelled, or the document moved on meanwhile). */
  async request(document: vscode.TextDocument, position: vscode.Position): Promise<WireEdit[] | undefined> {
    const client = this.host.client();
    if (!client || client.state !== State.Running) {
      return undefined;
    }
    const uri = document.uri.toString();
    this.cancel(uri);
    const source = new CancellationTokenSource();
    this.inflight.set(uri, source);
    const version = document.version;
    const c2p = client.code2ProtocolConverter;
    let edits: WireEdit[] | null;
    try {
      edits = await client.sendRequest<WireEdit[] | null>(NEXT_EDIT, {
        textDocument: { uri: c2p.asUri(document.uri), version },
        position: c2p.asPosition(position),
      }, source.token);
    } catch (error) {
      if (!source.token.isCancellationRequested) {
        this.host.output.warn(`${NEXT_EDIT} failed: ${String(error)}`);
      }
      return undefined;
    } finally {
      if (this.inflight.get(uri) === source) {
        this.inflight.delete(uri);
      }
    }
    if (source.token.isCancellationRequested || document.version !== version) {
      return undefined; // an answer for an older version: the buffer moved on
    }
    edits = Array.isArray(edits) ? edits : [];
    if (edits.length === 0) {
      this.clear(uri);
      return edits;
    }
    const p2c = client.protocol2CodeConverter;
    const proposal = { version, edits, ranges: edits.map((e) => p2c.asRange(e.range)) };
    if (!this.proposals.put(uri, version, document.version, proposal)) {
      return undefined;
    }
    this.redraw(document);
    this.updateContext();
    return edits;
  }

  // ----------------------------------------------------------------- drawing

  private redrawAll(): void {
    for (const editor of vscode.window.visibleTextEditors) {
      this.draw(editor);
    }
    this.updateContext();
  }

  private redraw(document: vscode.TextDocument): void {
    for (const editor of vscode.window.visibleTextEditors.filter((e) => e.document === document)) {
      this.draw(editor);
    }
  }

  private draw(editor: vscode.TextEditor): void {
    const proposal = this.shown(editor.document);
    const ranges = proposal?.ranges ?? [];
    const edits = proposal?.edits ?? [];
    editor.setDecorations(this.oldText, ranges.map((range, i) => ({
      range,
      hoverMessage: new vscode.MarkdownString(hoverDiff(editor.document.getText(range), edits[i].newText)),
    })));
    editor.setDecorations(this.newText, ranges.map((range, i) => ({
      range: new vscode.Range(range.end, range.end),
      renderOptions: { after: { contentText: afterText(edits[i].newText) } },
    })));
  }

  private updateContext(): void {
    const editor = vscode.window.activeTextEditor;
    const proposal = editor && this.shown(editor.document);
    const offscreen = !!proposal && isOffscreen(proposal.edits,
      editor.visibleRanges.map((r) => ({ first: r.start.line, last: r.end.line })));
    void vscode.commands.executeCommand("setContext", SHOWN, !!proposal);
    void vscode.commands.executeCommand("setContext", OFFSCREEN, offscreen);
    this.offscreenMessage?.dispose();
    this.offscreenMessage = undefined;
    if (proposal && offscreen) {
      const line = editLines(proposal.edits).first + 1;
      this.offscreenMessage = vscode.window.setStatusBarMessage(`$(arrow-swap) dllm: next edit at line ${line} (Tab jumps)`);
    }
  }

  private clear(uri: string): void {
    if (!this.proposals.drop(uri)) {
      return;
    }
    for (const editor of vscode.window.visibleTextEditors.filter((e) => e.document.uri.toString() === uri)) {
      this.draw(editor);
    }
    this.updateContext();
  }

  private forget(uri: string): void {
    this.cancel(uri);
    this.clear(uri);
  }

  // ------------------------------------------------------------------ acting

  private notify(method: string, document: vscode.TextDocument, version: number): void {
    const client = this.host.client();
    if (client && client.state === State.Running) {
      void client.sendNotification(method, {
        textDocument: { uri: client.code2ProtocolConverter.asUri(document.uri), version },
      });
    }
  }

  /** The active editor and the proposal it shows, if any. */
  private active(): { editor: vscode.TextEditor; proposal: Proposal } | undefined {
    const editor = vscode.window.activeTextEditor;
    const proposal = editor && this.shown(editor.document);
    return editor && proposal ? { editor, proposal } : undefined;
  }

  /** Apply the proposal shown as one edit (one undo step). A proposal for an older
   *  version is dropped, never applied; with none shown, Tab is a Tab. */
  async accept(): Promise<boolean> {
    const shown = this.active();
    if (!shown) {
      const editor = vscode.window.activeTextEditor;
      if (editor) {
        this.clear(editor.document.uri.toString());
      }
      await vscode.commands.executeCommand("tab");
      return false;
    }
    const { editor, proposal } = shown;
    this.clear(editor.document.uri.toString());
    this.notify("dllm/acceptEdit", editor.document, proposal.version);
    const applied = await editor.edit((builder) => {
      proposal.ranges.forEach((range, i) => builder.replace(range, proposal.edits[i].newText));
    });
    if (!applied) {
      this.host.output.warn("the next edit could not be applied (the document changed)");
    }
    return applied;
  }

  reject(): boolean {
    const shown = this.active();
    if (!shown) {
      return false;
    }
    const { editor, proposal } = shown;
    this.clear(editor.document.uri.toString());
    this.notify("dllm/rejectEdit", editor.document, proposal.version);
    return true;
  }

  /** Put the cursor at the proposal's start and scroll it into view. */
  jump(): boolean {
    const shown = this.active();
    if (!shown) {
      return false;
    }
    const { editor, proposal } = shown;
    const start = proposal.ranges[0].start;
    editor.selection = new vscode.Selection(start, start);
    editor.revealRange(proposal.ranges[0], vscode.TextEditorRevealType.InCenterIfOutsideViewport);
    this.updateContext();
    return true;
  }

  dispose(): void {
    for (const uri of [...this.timers.keys(), ...this.inflight.keys()]) {
      this.cancel(uri);
    }
    this.offscreenMessage?.dispose();
    this.disposables.forEach((d) => d.dispose());
  }
}
