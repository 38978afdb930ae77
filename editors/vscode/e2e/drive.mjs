// Drives code-server (VS Code in the browser) in Debian's headless Chromium
// like a person: opens calc.py, types a new line, waits for ghost text from
// the dllm extension, accepts it with Tab, saves; opens the suggest widget;
// runs "dllm: Regenerate Selection" on line 1 and saves. Prints one JSON object
// with what it saw; screenshots go to SHOTS. Used by tests/editors/test_vscode_e2e.py.
//
//   node drive.mjs URL FOLDER SHOTS FILE TIMEOUT_MS GHOST_TIMEOUT_MS [LINE TEXT]
//
// Without LINE: a new line after line 1 (Enter; Python auto-indents). With LINE:
// the end of that line (Go to Line), then TEXT is typed there.
import { args, session } from "./workbench.mjs";

const { url, folder, shots, file, rest } = args();
const [timeoutArg, ghostTimeoutArg, lineArg, typeText] = rest;
const timeout = Number(timeoutArg || 30000);
const ghostTimeout = Number(ghostTimeoutArg || 10000);

await session({ url, folder, shots, file }, async (ui, result) => {
  const page = ui.page;
  result.statusBar = await ui.waitForServer(timeout);
  await ui.shot("01-opened");

  // Type: end of line 1, Enter (Python auto-indents), or TEXT at the end of LINE;
  // then ask for ghost text.
  await page.locator(".monaco-editor .view-lines").first().click();
  if (lineArg) {
    await ui.goToLine(lineArg);
    await page.keyboard.type(typeText || "");
  } else {
    await page.keyboard.press("Control+Home");
    await page.keyboard.press("End");
    await page.keyboard.press("Enter");
  }
  result.steps.push("typed");
  const ghost = page.locator(".monaco-editor .ghost-text-decoration, .monaco-editor .ghost-text");
  try {
    await ghost.first().waitFor({ timeout: Math.min(5000, ghostTimeout) });
  } catch {
    await ui.palette("Trigger Inline Suggestion");
    await ghost.first().waitFor({ timeout: ghostTimeout }).catch(() => {});
  }
  if (await ghost.count()) {
    // The first line is inline decorations (one span per token); further lines
    // are rendered as extra view lines inside .ghost-text.
    const inline = (await page.locator(".monaco-editor .ghost-text-decoration").allInnerTexts()).join("");
    const more = await page.locator(".monaco-editor .ghost-text .view-line").allInnerTexts();
    result.ghost = [inline, ...more].join("\n").replace(/\u00a0/g, " ");
    result.steps.push("ghost");
    await ui.shot("02-ghost-text");
    await page.keyboard.press("Tab");
    await page.waitForTimeout(300);
    result.steps.push("accepted");
  } else {
    result.ghost = null; // test_vscode_e2e.py decides whether that is a failure
    await ui.shot("02-no-ghost-text");
  }
  result.afterAccept = await ui.editorText();
  await page.keyboard.press("Control+s");
  await ui.shot("03-accepted");

  // The completion provider: open the suggest widget on a new line and read its rows.
  await page.keyboard.press("End");
  await page.keyboard.press("Enter");
  await page.keyboard.press("Control+Space");
  const rows = page.locator(".suggest-widget .monaco-list-row");
  try {
    await rows.first().waitFor({ timeout });
    result.suggestions = (await rows.allInnerTexts()).map((t) => t.split("\n")[0]);
  } catch {
    result.suggestions = [];
  }
  await ui.shot("04-suggest");
  await page.keyboard.press("Escape");
  await page.keyboard.press("Control+z");
  await page.keyboard.press("Control+s");

  // Regenerate selection: select line 1 and run the palette command.
  await page.keyboard.press("Control+Home");
  await page.keyboard.press("Shift+End");
  const before = (await ui.editorText()).join("\n");
  await ui.palette("dllm: Regenerate Selection");
  // Either the edit arrives, or the server says why there is none (a toast).
  await page.waitForFunction(
    (prev) => [...document.querySelectorAll(".monaco-editor .view-lines .view-line")]
      .map((e) => e.textContent.replace(/\u00a0/g, " ")).join("\n") !== prev
      || /regenerate/i.test(document.querySelector(".notifications-toasts")?.textContent ?? ""),
    before, { timeout },
  );
  result.toasts = (await page.locator(".notifications-toasts .notification-toast").allInnerTexts());
  result.afterRegenerate = await ui.editorText();
  await page.keyboard.press("Control+s");
  await page.waitForTimeout(500);
  result.steps.push("regenerated");
  await ui.shot("05-regenerated");

  // Fill holes: a function whose body is a hole marker, then the palette command.
  await page.keyboard.press("Control+End");
  await page.keyboard.type("def sub(a, b):");
  await page.keyboard.press("Enter");
  await page.keyboard.type("{{fill}}");
  await page.keyboard.press("Escape");
  // The marker must be on screen (typed, not swallowed by a popup) before the command runs.
  await page.waitForFunction(
    () => [...document.querySelectorAll(".monaco-editor .view-lines .view-line")]
      .some((e) => e.textContent.includes("{{fill}}")),
    null, { timeout: 10000 },
  );
  const beforeFill = (await ui.editorText()).join("\n");
  await ui.palette("dllm: Fill Holes in File");
  // Wait for the marker itself to go (any other change, e.g. ghost text rendering
  // after the typing, would end the wait before the edit lands), or the server's toast.
  await page.waitForFunction(
    (prev) => prev.includes("{{fill}}") && ![...document.querySelectorAll(".monaco-editor .view-lines .view-line")]
      .map((e) => e.textContent.replace(/\u00a0/g, " ")).join("\n").includes("{{fill}}")
      || /fill holes/i.test(document.querySelector(".notifications-toasts")?.textContent ?? ""),
    beforeFill, { timeout },
  );
  result.afterFill = await ui.editorText();
  result.toasts.push(...(await page.locator(".notifications-toasts .notification-toast").allInnerTexts()));
  await page.keyboard.press("Control+s");
  await page.waitForTimeout(500);
  result.steps.push("filled");
  await ui.shot("06-filled");

  // "Show Engine Status" asks the server (dllm.engineStatus) and shows a toast.
  await ui.palette("dllm: Show Engine Status");
  const toast = page.locator(".notifications-toasts .notification-toast", { hasText: "dllm engine" });
  await toast.first().waitFor({ timeout });
  result.engineStatusToast = (await toast.first().innerText()).replace(/\s+/g, " ");
  await ui.shot("07-engine-status");
});
