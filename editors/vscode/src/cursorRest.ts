// Where the cursor comes to rest, for the server's `dllm/prepareCompletion`: the server has
// the engine encode the context a completion at that place would carry, so the first
// keystroke's request there finds it cached (docs/server.md). This module only decides which
// moves are rests and when one has lasted; it has no `vscode` import, so node:test drives it
// with fake timers. Everything else (the setting, stale versions, cancelling) is the server's.

/** vscode.TextEditorSelectionChangeKind values: a cursor key (or a typed character) and a click. */
export const KEYBOARD = 1;
export const MOUSE = 2;

/** How long the cursor must stay put before its place is sent: holding an arrow key or
 *  clicking around sends nothing, and a person takes longer than this to start typing. */
export const REST_MS = 250;

export interface Place {
  uri: string;
  version: number;
  line: number;
  character: number;
}

/** A selection as this module reads it (vscode.Selection has the field). */
export interface Selectionish {
  readonly isEmpty: boolean;
}

export interface Timers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const realTimers: Timers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

const key = (p: Place) => JSON.stringify([p.uri, p.version, p.line, p.character]);

export class CursorRest {
  private timer: unknown;
  // The document of the previous event: a move is a rest only when no edit of that document
  // came between. Typing reports kind Keyboard too (VS Code runs the `type` command with
  // source "keyboard"), and its requests already carry their own context. Another document,
  // or none yet (the editor was active before the extension started), tells nothing.
  private seen: { uri: string; version: number } | undefined;
  private sent: string | undefined;

  /** `send` returns whether the place went out (false: no running server, completions off). */
  constructor(private readonly send: (place: Place) => boolean, private readonly timers: Timers = realTimers) {}

  /** A selection change in an editor of a completed document; `kind` as VS Code reports it
   *  (Command and undefined come from commands, edits, snippets: not a place the user chose). */
  moved(kind: number | undefined, selections: readonly Selectionish[], place: Place): void {
    const edited = this.see(place);
    if (edited || (kind !== KEYBOARD && kind !== MOUSE)) {
      this.cancel();
      return;
    }
    this.restAt(selections, place);
  }

  /** A newly focused editor: its cursor is a place the user may type at, as after a click. */
  focused(selections: readonly Selectionish[], place: Place): void {
    this.see(place);
    this.restAt(selections, place);
  }

  /** The cursor left for somewhere nothing is prepared: the pending place is not sent. */
  cancel(): void {
    if (this.timer !== undefined) {
      this.timers.clearTimeout(this.timer);
      this.timer = undefined;
    }
  }

  dispose(): void {
    this.cancel();
  }

  /** Records the event's document; true when it was edited since the previous event. */
  private see(place: Place): boolean {
    const edited = this.seen?.uri === place.uri && this.seen.version !== place.version;
    this.seen = { uri: place.uri, version: place.version };
    return edited;
  }

  private restAt(selections: readonly Selectionish[], place: Place): void {
    this.cancel();
    // A selection or several cursors: no single place where typing would start.
    if (selections.length !== 1 || !selections[0].isEmpty) {
      return;
    }
    this.timer = this.timers.setTimeout(() => {
      this.timer = undefined;
      const at = key(place);
      if (at !== this.sent && this.send(place)) {
        this.sent = at;
      }
    }, REST_MS);
  }
}
