// Next-edit suggestions in code-server, driven like a person (tests/editors/test_vscode_next_edit.py).
//
//   node next-edit.mjs URL FOLDER SHOTS FILE TIMEOUT_MS DOUBLE_LINE [SETTINGS_FILE REAL_SETTINGS MODEL]
//
// With the server over a scripted engine (so the proposal is known): rename `w` to `width`
// at the definition on line 1; the proposal at its use is off-screen, so the status bar
// says where and Tab jumps to it; the decoration strikes `w` through and shows `width` after
// it; Tab applies it. Then rename `x` to `n` in `def double(x):` on DOUBLE_LINE; the proposal
// is on screen; Esc rejects it, and asking again (dllm: Suggest Next Edit) gets nothing,
// since the server heard the rejection; then Tab is a plain Tab again.
// Then, with SETTINGS_FILE: the JSON object REAL_SETTINGS is merged into the user settings
// in the settings editor (the extension passes them on, the server switches engines), the status bar names MODEL,
// and a rename plus the explicit command checks the plumbing against that real model: a
// proposal or "no next edit", either is fine, an error is not. Prints one JSON object.
import fs from "node:fs";
import path from "node:path";
import { args, session } from "./workbench.mjs";

const { url, folder, shots, file, rest } = args();
const timeout = Number(rest[0] || 30000);
const [, doubleLine, settingsFile, realSettings, model] = rest;

const NO_EDIT = "no next edit to suggest here";
const OFFSCREEN = "next edit at line";

// What the decorations draw: text struck through, and the `after` text (a CSS ::after
// pseudo-element, so it is not in the line's text).
function decorations(page) {
  return page.evaluate(() => {
    const struck = [];
    const after = [];
    for (const el of document.querySelectorAll(".monaco-editor .view-lines .view-line span")) {
      if (getComputedStyle(el).textDecorationLine.includes("line-through") && el.children.length === 0) {
        struck.push(el.textContent.replace(/\u00a0/g, " "));
      }
      const content = getComputedStyle(el, "::after").content;
      if (content && content !== "none" && content !== "normal") {
        after.push(JSON.parse(content));
      }
    }
    return { struck, after };
  });
}

function statusText(page) {
  return page.evaluate(() => document.querySelector(".statusbar")?.textContent ?? "");
}

async function waitForStatus(page, text, ms) {
  await page.waitForFunction((t) => (document.querySelector(".statusbar")?.textContent ?? "").includes(t),
    text, { timeout: ms });
}

async function waitForStruck(page, present, ms) {
  await page.waitForFunction((want) => [...document.querySelectorAll(".monaco-editor .view-lines .view-line span")]
    .some((el) => getComputedStyle(el).textDecorationLine.includes("line-through")) === want, present, { timeout: ms });
}

async function cursor(page) {
  const text = await page.locator('[id="status.editor.selection"]').innerText();
  const [, line, col] = /Ln (\d+), Col (\d+)/.exec(text) ?? [];
  return [Number(line), Number(col)];
}

/** Select `length` characters at (line, col) (1-based line, 0-based col) and type `text`. */
async function replaceAt(ui, line, col, length, text) {
  await ui.goToLine(line, col + 1);
  for (let i = 0; i < length; i++) await ui.page.keyboard.press("Shift+ArrowRight");
  await ui.page.keyboard.type(text);
}

/** Switch the server to a real model through the user settings, then ask once. */
async function realModel(ui, result) {
  const page = ui.page;
  // Through the settings editor, as a person would (code-server does not pick up the file
  // written behind its back): all of it replaced, inserted as text (no auto-closed quotes).
  const settings = JSON.parse(fs.readFileSync(settingsFile, "utf8"));
  await ui.palette("Preferences: Open User Settings (JSON)");
  const editor = page.locator(".monaco-editor", { hasText: "chat.disableAIFeatures" }).last();
  await editor.waitFor({ timeout: 10000 });
  await editor.locator(".view-lines").click();
  await page.keyboard.press("Control+a");
  await page.keyboard.insertText(JSON.stringify({ ...settings, ...JSON.parse(realSettings) }, null, 2));
  await page.keyboard.press("Control+s");
  await page.keyboard.press("Control+w");
  await editor.waitFor({ state: "detached", timeout: 10000 });
  await page.waitForFunction((m) => (document.getElementById("dllm-lsp.dllm-lsp.dllm.status")?.textContent ?? "")
    .includes(m), model, { timeout });
  result.realStatusBar = await ui.waitForServer(timeout);
  await replaceAt(ui, 1, "def area(width, ".length, "height".length, "h");
  await ui.palette("dllm: Suggest Next Edit");
  await page.waitForFunction(([none, off]) => {
    const bar = document.querySelector(".statusbar")?.textContent ?? "";
    return bar.includes(none) || bar.includes(off) || [...document.querySelectorAll(".monaco-editor .view-line span")]
      .some((el) => getComputedStyle(el).textDecorationLine.includes("line-through"));
  }, [NO_EDIT, OFFSCREEN], { timeout });
  const bar = await statusText(page);
  result.realOutcome = bar.includes(NO_EDIT) ? "none" : "proposal";
  result.realDecorations = await decorations(page);
  result.toasts = await page.locator(".notifications-toasts .notification-toast").allInnerTexts();
  await ui.shot("07-real-model");
  result.steps.push("real model answered");
}

await session({ url, folder, shots, file }, async (ui, result) => {
  const page = ui.page;
  result.statusBar = await ui.waitForServer(timeout);
  await page.locator(".monaco-editor .view-lines").first().click();
  await replaceAt(ui, 1, "def area(".length, 1, "width");
  result.steps.push("renamed");

  // The use is below the fold: the status bar says where, Tab jumps there.
  await waitForStatus(page, OFFSCREEN, timeout);
  result.offscreenMessage = (await statusText(page)).match(/next edit at line \d+ \(Tab jumps\)/)?.[0] ?? null;
  result.cursorBeforeJump = await cursor(page);
  await ui.shot("01-offscreen");
  await page.keyboard.press("Tab");
  await waitForStruck(page, true, 10000);
  result.cursorAfterJump = await cursor(page);
  result.shown = await decorations(page);
  result.steps.push("jumped");
  await ui.shot("02-proposal");
  await page.keyboard.press("Tab");
  await waitForStruck(page, false, 10000);
  result.steps.push("accepted");
  await page.keyboard.press("Control+s");
  await ui.shot("03-accepted");

  // Esc rejects; the server does not offer the rejected edit again.
  await replaceAt(ui, Number(doubleLine), "def double(".length, 1, "n");
  await waitForStruck(page, true, timeout);
  result.shownSecond = await decorations(page);
  await ui.shot("04-second-proposal");
  await page.keyboard.press("Escape");
  await waitForStruck(page, false, 10000);
  result.steps.push("rejected");
  await ui.palette("dllm: Suggest Next Edit");
  await waitForStatus(page, NO_EDIT, timeout);
  result.afterRejectAskAgain = (await decorations(page)).struck;
  result.steps.push("not re-proposed");
  await ui.shot("05-rejected");

  // No proposal shown: Tab and Esc are the editor's own again.
  const before = await ui.editorText();
  await page.keyboard.press("Tab");
  await page.waitForTimeout(200);
  const after = await ui.editorText();
  result.tabWithoutProposal = after.filter((l, i) => l !== before[i]);
  await page.keyboard.press("Control+z");
  await page.keyboard.press("Control+s");
  await page.waitForTimeout(500);
  result.steps.push("saved");
  result.savedText = fs.readFileSync(path.join(folder, file), "utf8");
  await ui.shot("06-saved");
  if (settingsFile) {
    await realModel(ui, result);
  }
});
