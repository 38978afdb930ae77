import assert from "node:assert/strict";
import { test } from "node:test";
import { VersionedProposals, WireEdit, afterText, duplicatesProposal, hoverDiff, isOffscreen, overlaps } from "../src/nextEditView";

const range = (l1: number, c1: number, l2: number, c2: number) => ({
  start: { line: l1, character: c1 },
  end: { line: l2, character: c2 },
});
const edit = (l1: number, c1: number, l2: number, c2: number, newText = "x"): WireEdit =>
  ({ range: range(l1, c1, l2, c2), newText, confidence: 0.9 });

test("the new text is drawn on one line: breaks marked, continuation indentation dropped", () => {
  assert.equal(afterText("width"), "width");
  assert.equal(afterText("with open(p) as f:\n    data = f.read()"), "with open(p) as f: \u23ce data = f.read()");
  assert.equal(afterText("a\r\nb"), "a \u23ce b");
  assert.equal(afterText(""), "\u2205"); // a deletion still shows something
});

test("the hover shows the proposal as a diff", () => {
  const md = hoverDiff("w", "width");
  assert.match(md, /```diff\n- w\n\+ width\n```/);
});

test("off-screen: no edited line inside a visible range", () => {
  const edits = [edit(46, 11, 46, 12)];
  assert.equal(isOffscreen(edits, [{ first: 0, last: 35 }]), true);
  assert.equal(isOffscreen(edits, [{ first: 30, last: 60 }]), false);
  // Folded editors have several visible ranges; a multi-line edit shown in part is on screen.
  assert.equal(isOffscreen([edit(40, 0, 50, 3)], [{ first: 0, last: 10 }, { first: 48, last: 70 }]), false);
  assert.equal(isOffscreen([], [{ first: 0, last: 1 }]), false);
});

test("ranges overlap when they share a character, not when they only touch", () => {
  assert.equal(overlaps(range(1, 0, 1, 5), range(1, 4, 1, 8)), true);
  assert.equal(overlaps(range(1, 0, 1, 5), range(1, 5, 1, 8)), false);
  assert.equal(overlaps(range(0, 0, 3, 0), range(1, 2, 1, 3)), true);
});

test("an inline item that replaces text the proposal covers is a duplicate; an insertion is not", () => {
  const edits = [edit(1, 11, 1, 12, "width")];
  assert.equal(duplicatesProposal(range(1, 11, 1, 12), edits), true);
  assert.equal(duplicatesProposal(range(1, 4, 1, 20), edits), true);
  assert.equal(duplicatesProposal(range(1, 20, 1, 20), edits), false); // ghost text at the cursor
  assert.equal(duplicatesProposal(undefined, edits), false);
  assert.equal(duplicatesProposal(range(2, 0, 2, 4), edits), false);
});

test("a proposal is kept for the version it was computed on, never given for another", () => {
  const store = new VersionedProposals<string>();
  assert.equal(store.put("file:///a.py", 3, 4, "late"), false); // the document moved on meanwhile
  assert.equal(store.current("file:///a.py", 3), undefined);
  assert.equal(store.put("file:///a.py", 4, 4, "edit"), true);
  assert.deepEqual(store.current("file:///a.py", 4), { version: 4, value: "edit" });
  assert.equal(store.current("file:///a.py", 5), undefined); // typed since: stale, not applied
  assert.equal(store.current("file:///b.py", 4), undefined);
  assert.equal(store.drop("file:///a.py"), true);
  assert.equal(store.drop("file:///a.py"), false);
});
