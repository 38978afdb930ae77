import assert from "node:assert/strict";
import { test } from "node:test";
import { CursorRest, KEYBOARD, MOUSE, Place, REST_MS, Timers } from "../src/cursorRest";

const COMMAND = 3;
const cursor = [{ isEmpty: true }];

/** Timers driven by hand: `advance(ms)` runs what falls due. */
function fakeTimers() {
  let now = 0;
  let next = 0;
  const pending = new Map<number, { at: number; fn: () => void }>();
  const timers: Timers = {
    setTimeout: (fn, ms) => {
      pending.set(++next, { at: now + ms, fn });
      return next;
    },
    clearTimeout: (handle) => void pending.delete(handle as number),
  };
  const advance = (ms: number) => {
    now += ms;
    for (const [id, t] of [...pending].sort((a, b) => a[1].at - b[1].at)) {
      if (t.at <= now) {
        pending.delete(id);
        t.fn();
      }
    }
  };
  return { timers, advance, pending: () => pending.size };
}

function setup(accept = () => true) {
  const sent: Place[] = [];
  const clock = fakeTimers();
  const rest = new CursorRest((p) => accept() && sent.push(p) > 0, clock.timers);
  const at = (line: number, character: number, version = 1, uri = "file:///a.py"): Place =>
    ({ uri, version, line, character });
  // The editor is focused first (as VS Code reports it), which also records its document.
  rest.focused([{ isEmpty: false }], at(0, 0));
  return { rest, sent, at, ...clock };
}

test("a click or a cursor key that rests REST_MS is sent, once", () => {
  const { rest, sent, at, advance } = setup();
  rest.moved(MOUSE, cursor, at(3, 4));
  advance(REST_MS - 1);
  assert.deepEqual(sent, []);
  advance(1);
  assert.deepEqual(sent, [at(3, 4)]);
  rest.moved(KEYBOARD, cursor, at(4, 0));
  advance(REST_MS);
  assert.deepEqual(sent, [at(3, 4), at(4, 0)]);
});

test("typing is not a rest: its selection change comes with a new version, whatever its kind", () => {
  const { rest, sent, at, advance } = setup();
  rest.moved(MOUSE, cursor, at(3, 4));
  // Backspace and accepted suggestions report undefined, a typed character Keyboard.
  rest.moved(undefined, cursor, at(3, 3, 2));
  rest.moved(KEYBOARD, cursor, at(3, 4, 3));
  advance(REST_MS * 4);
  assert.deepEqual(sent, [], "the click's place was left by typing: not sent");
  // The next cursor key at the same version is a move again.
  rest.moved(KEYBOARD, cursor, at(2, 0, 3));
  advance(REST_MS);
  assert.deepEqual(sent, [at(2, 0, 3)]);
});

test("the first move counts: the editor may have been active before the extension started", () => {
  const sent: Place[] = [];
  const clock = fakeTimers();
  const rest = new CursorRest((p) => sent.push(p) > 0, clock.timers);
  const place = { uri: "file:///a.py", version: 3, line: 8, character: 22 };
  rest.moved(MOUSE, cursor, place);
  clock.advance(REST_MS);
  assert.deepEqual(sent, [place]);
});

test("command-made and unknown-kind moves are ignored and cancel a pending rest", () => {
  const { rest, sent, at, advance } = setup();
  rest.moved(COMMAND, cursor, at(1, 0));
  rest.moved(undefined, cursor, at(2, 0));
  advance(REST_MS * 2);
  assert.deepEqual(sent, []);
  rest.moved(KEYBOARD, cursor, at(3, 0));
  advance(REST_MS / 2);
  rest.moved(COMMAND, cursor, at(9, 0)); // e.g. Go to Definition: the cursor is no longer at 3:0
  advance(REST_MS * 2);
  assert.deepEqual(sent, []);
});

test("several cursors and non-empty selections are ignored", () => {
  const { rest, sent, at, advance } = setup();
  rest.moved(MOUSE, [{ isEmpty: true }, { isEmpty: true }], at(1, 0));
  advance(REST_MS * 2);
  rest.moved(KEYBOARD, [{ isEmpty: false }], at(1, 3));
  advance(REST_MS * 2);
  assert.deepEqual(sent, []);
});

test("a burst of moves sends only its last place, REST_MS after it", () => {
  const { rest, sent, at, advance } = setup();
  for (let line = 1; line <= 10; line++) {
    rest.moved(KEYBOARD, cursor, at(line, 0)); // an arrow key held down
    advance(30);
  }
  assert.deepEqual(sent, []);
  advance(REST_MS - 30);
  assert.deepEqual(sent, [at(10, 0)]);
});

test("the same place is not sent twice in a row; another place, then it again, is", () => {
  const { rest, sent, at, advance } = setup();
  rest.moved(MOUSE, cursor, at(5, 2));
  advance(REST_MS);
  rest.moved(MOUSE, cursor, at(5, 2));
  advance(REST_MS);
  rest.moved(KEYBOARD, cursor, at(6, 2));
  rest.moved(KEYBOARD, cursor, at(5, 2)); // down and back up at once: still at the place sent
  advance(REST_MS);
  assert.deepEqual(sent, [at(5, 2)]);
  rest.moved(KEYBOARD, cursor, at(6, 2));
  advance(REST_MS);
  rest.moved(KEYBOARD, cursor, at(5, 2));
  advance(REST_MS);
  assert.deepEqual(sent, [at(5, 2), at(6, 2), at(5, 2)]);
});

test("a newly focused editor's cursor is a place; switching back sends it again", () => {
  const { rest, sent, at, advance } = setup();
  rest.focused(cursor, at(7, 1, 4, "file:///b.py"));
  advance(REST_MS);
  rest.focused(cursor, at(2, 0));
  advance(REST_MS);
  assert.deepEqual(sent, [at(7, 1, 4, "file:///b.py"), at(2, 0)]);
  // A move in the focused editor right away counts (same document, same version).
  rest.moved(MOUSE, cursor, at(2, 5));
  advance(REST_MS);
  assert.equal(sent.length, 3);
});

test("a place the client could not send is not remembered as sent", () => {
  let running = false;
  const { rest, sent, at, advance } = setup(() => running);
  rest.moved(MOUSE, cursor, at(1, 1));
  advance(REST_MS);
  running = true;
  rest.moved(MOUSE, cursor, at(1, 1));
  advance(REST_MS);
  assert.deepEqual(sent, [at(1, 1)]);
});

test("cancel and dispose stop the pending send", () => {
  const { rest, sent, at, advance, pending } = setup();
  rest.moved(MOUSE, cursor, at(1, 1));
  rest.cancel();
  rest.moved(MOUSE, cursor, at(2, 1));
  rest.dispose();
  assert.equal(pending(), 0);
  advance(REST_MS * 2);
  assert.deepEqual(sent, []);
});
