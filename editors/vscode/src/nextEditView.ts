// How a next-edit proposal is drawn and when it counts as shown, as pure functions
// (no `vscode` import, so node --test covers them). VS Code decorations cannot add
// lines, so the new text goes after the struck-through old text on one line.

/** LSP position/range as they come over the wire (0-based, UTF-16). */
export interface WirePosition {
  line: number;
  character: number;
}
export interface WireRange {
  start: WirePosition;
  end: WirePosition;
}
/** One edit of the server's `dllm/nextEdit` answer. */
export interface WireEdit {
  range: WireRange;
  newText: string;
  confidence: number;
}

/** Lines [first, last] (0-based, inclusive) a line range covers, as in `TextEditor.visibleRanges`. */
export interface LineSpan {
  first: number;
  last: number;
}

const NEWLINE_MARK = " \u23ce "; // "⏎": a line break the decoration cannot draw

/** The text drawn after the replaced text: one line, line breaks marked, the indentation
 *  of continuation lines dropped (it would only push the rest out of view). */
export function afterText(newText: string): string {
  const lines = newText.replace(/\r\n?/g, "\n").split("\n");
  const shown = lines.map((line, i) => (i === 0 ? line : line.trimStart())).join(NEWLINE_MARK);
  // An empty contentText draws nothing, so a pure deletion says it is one.
  return shown === "" ? "\u2205" : shown; // "∅"
}

/** The full proposal as a Markdown diff for the hover: old lines, then new lines. */
export function hoverDiff(oldText: string, newText: string): string {
  const fence = "```";
  const minus = oldText.split("\n").map((l) => `- ${l}`);
  const plus = newText.split("\n").map((l) => `+ ${l}`);
  return `**dllm next edit** (Tab accepts, Esc rejects)\n\n${fence}diff\n${[...minus, ...plus].join("\n")}\n${fence}`;
}

/** Lines the edits touch, first to last. */
export function editLines(edits: readonly WireEdit[]): LineSpan {
  return {
    first: Math.min(...edits.map((e) => e.range.start.line)),
    last: Math.max(...edits.map((e) => e.range.end.line)),
  };
}

/** Off-screen: no edited line is in any visible range (then Tab jumps before it accepts). */
export function isOffscreen(edits: readonly WireEdit[], visible: readonly LineSpan[]): boolean {
  if (edits.length === 0) {
    return false;
  }
  const span = editLines(edits);
  return !visible.some((v) => v.first <= span.last && span.first <= v.last);
}

function before(a: WirePosition, b: WirePosition): boolean {
  return a.line < b.line || (a.line === b.line && a.character < b.character);
}

/** Whether two ranges share any character (touching ends do not). */
export function overlaps(a: WireRange, b: WireRange): boolean {
  return before(a.start, b.end) && before(b.start, a.end);
}

/** An inline completion item that replaces text a shown proposal already covers is the
 *  proposal again (the server offers it as an item on its line): the decoration shows it,
 *  so the item is dropped rather than drawn twice. Pure insertions at the cursor stay. */
export function duplicatesProposal(itemRange: WireRange | undefined, edits: readonly WireEdit[]): boolean {
  if (!itemRange || !before(itemRange.start, itemRange.end)) {
    return false;
  }
  return edits.some((e) => overlaps(itemRange, e.range));
}

/** Proposals by document, each kept for the version it was computed on: `current` gives
 *  one only while the document is still at that version, so a stale one (the document
 *  moved on while it was computed, or since it was drawn) is never shown nor applied. */
export class VersionedProposals<T> {
  private readonly byUri = new Map<string, { version: number; value: T }>();

  /** Keep `value` when the answer is for the document's version now; false (dropped) otherwise. */
  put(uri: string, askedVersion: number, versionNow: number, value: T): boolean {
    if (askedVersion !== versionNow) {
      return false;
    }
    this.byUri.set(uri, { version: askedVersion, value });
    return true;
  }

  current(uri: string, versionNow: number): { version: number; value: T } | undefined {
    const entry = this.byUri.get(uri);
    return entry && entry.version === versionNow ? entry : undefined;
  }

  /** Forget the document's proposal; true when there was one. */
  drop(uri: string): boolean {
    return this.byUri.delete(uri);
  }
}
