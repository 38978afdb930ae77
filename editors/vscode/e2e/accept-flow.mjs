// Take a suggestion, pause, press Enter, in code-server, driven like a person
// (tests/editors/test_vscode_accept_flow.py):
//
//   node accept-flow.mjs URL FOLDER SHOTS FILE TIMEOUT_MS LINE TEXT PAUSE_MS
//
// TEXT typed at the end of LINE; the ghost text that comes is accepted with Tab; a pause
// (VS Code asks again at the accepted line's end at once); Enter (Python's auto-indent); the
// ghost text on the new line, which the server's next-line prefetch should have answered.
// Prints one JSON object.
import { args, session } from "./workbench.mjs";

const { url, folder, shots, file, rest } = args();
const [timeoutArg, lineArg, typeText, pauseArg] = rest;
const timeout = Number(timeoutArg || 30000);

/** The ghost text once it shows: its first line's inline decorations, then its further lines. */
async function ghostText(page) {
  await page.locator(".monaco-editor .ghost-text-decoration, .monaco-editor .ghost-text").first()
    .waitFor({ timeout });
  const inline = (await page.locator(".monaco-editor .ghost-text-decoration").allInnerTexts()).join("");
  const more = await page.locator(".monaco-editor .ghost-text .view-line").allInnerTexts();
  return [inline, ...more].join("\n").replace(/\u00a0/g, " ");
}

await session({ url, folder, shots, file }, async (ui, result) => {
  const page = ui.page;
  result.statusBar = await ui.waitForServer(timeout);
  await page.locator(".monaco-editor .view-lines").first().click();
  await ui.goToLine(lineArg);
  await page.keyboard.type(typeText);
  result.ghost = await ghostText(page);
  result.steps.push("ghost");
  await ui.shot("01-ghost");
  await page.keyboard.press("Tab");
  await page.waitForTimeout(Number(pauseArg || 400));
  result.afterAccept = await ui.editorText();
  result.steps.push("accepted");
  await page.keyboard.press("Enter");
  result.ghostAfterEnter = await ghostText(page);
  result.afterEnter = await ui.editorText();
  result.steps.push("ghost after enter");
  await ui.shot("02-after-enter");
});
