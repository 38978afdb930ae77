// Where the cursor rests, in code-server, driven like a person (tests/editors/test_vscode_prepare.py):
//
//   node prepare.mjs URL FOLDER SHOTS FILE TIMEOUT_MS
//
// A click past the end of `return side * side`, then ArrowUp, each followed by a rest: the
// extension sends `dllm/prepareCompletion` for each place (the test reads the places the
// engine was asked to prepare). Then ` # ok` typed a key each 60 ms and a rest: typing sends
// none. Then ArrowLeft and a rest: a cursor key after typing is a move again. Prints one JSON object.
import { args, session } from "./workbench.mjs";

const { url, folder, shots, file, rest } = args();
const timeout = Number(rest[0] || 30000);
// Longer than the extension's REST_MS (250) plus the server's round trip to the engine.
const SETTLE_MS = 1200;

async function cursor(page) {
  const text = await page.locator('[id="status.editor.selection"]').innerText();
  const [, line, col] = /Ln (\d+), Col (\d+)/.exec(text) ?? [];
  return [Number(line), Number(col)];
}

await session({ url, folder, shots, file }, async (ui, result) => {
  const page = ui.page;
  result.statusBar = await ui.waitForServer(timeout);
  // Right of a line's text: the click puts the cursor at its end.
  const text = page.locator(".monaco-editor .view-line", { hasText: "return side * side" }).locator("span").first();
  const box = await text.boundingBox();
  await page.mouse.click(box.x + box.width + 120, box.y + box.height / 2);
  await page.waitForTimeout(SETTLE_MS);
  result.cursorAfterClick = await cursor(page);
  result.steps.push("clicked");
  await page.keyboard.press("ArrowUp");
  await page.waitForTimeout(SETTLE_MS);
  result.cursorAfterUp = await cursor(page);
  result.steps.push("arrow up");
  await page.keyboard.type(" # ok", { delay: 60 });
  await page.waitForTimeout(SETTLE_MS);
  result.steps.push("typed");
  await ui.shot("01-typed");
  await page.keyboard.press("ArrowLeft");
  await page.waitForTimeout(SETTLE_MS);
  result.cursorAfterLeft = await cursor(page);
  result.editor = await ui.editorText();
  result.steps.push("arrow left");
  await ui.shot("02-rested");
});
