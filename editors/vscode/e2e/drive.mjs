// Drives code-server (VS Code in the browser) in Debian's headless Chromium
// like a person: opens calc.py, types a new line, waits for ghost text from
// the dllm extension, accepts it with Tab, saves; opens the suggest widget;
// runs "dllm: Regenerate Selection" on line 1 and saves. Prints one JSON object
// with what it saw; screenshots go to SHOTS. Used by tests/editors/test_vscode_e2e.py.
//
//   node drive.mjs URL FOLDER SHOTS TIMEOUT_MS GHOST_TIMEOUT_MS [LINE TEXT]
//
// Without LINE: a new line after line 1 (Enter; Python auto-indents). With LINE:
// the end of that line (Go to Line), then TEXT is typed there.
import { chromium } from "playwright-core";
import path from "node:path";

const [url, folder, shots, timeoutArg, ghostTimeoutArg, lineArg, typeText] = process.argv.slice(2);
const timeout = Number(timeoutArg || 30000);
const ghostTimeout = Number(ghostTimeoutArg || 10000);
const result = { steps: [] };
let page;

async function shot(name) {
  await page.screenshot({ path: path.join(shots, `${name}.png`) });
}

async function palette(command) {
  await page.keyboard.press("F1");
  const input = page.locator(".quick-input-widget input");
  await input.waitFor({ state: "visible", timeout: 10000 });
  await input.fill(`>${command}`);
  // Click the row that names the command: Enter runs the focused row, which can
  // still be a recently-used command while the list is being filtered.
  const row = page.locator(".quick-input-list .monaco-list-row", { hasText: command }).first();
  await row.waitFor({ timeout: 10000 });
  await row.click();
}

async function editorText() {
  // Monaco renders spaces as U+00A0.
  const lines = await page.locator(".monaco-editor .view-lines .view-line").allInnerTexts();
  return lines.map((l) => l.replace(/\u00a0/g, " "));
}

async function main() {
  const browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
  });
  try {
    page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    await page.goto(`${url}/?folder=${encodeURIComponent(folder)}`);
    await page.locator(".monaco-workbench").waitFor({ timeout: 60000 });
    const row = page.locator(".explorer-folders-view .monaco-list-row", { hasText: "calc.py" });
    await row.waitFor({ timeout: 30000 });
    await row.click();
    await page.locator(".monaco-editor .view-lines").first().waitFor({ timeout: 20000 });
    result.steps.push("opened");

    // The extension's status-bar item: "starting" until the server's first
    // dllm/status notification, "loading" while the engine loads the model.
    const status = page.locator('[id="dllm-lsp.dllm-lsp.dllm.status"]');
    await status.waitFor({ timeout });
    await page.waitForFunction(
      () => !/starting|loading/.test(document.getElementById("dllm-lsp.dllm-lsp.dllm.status")?.textContent ?? "starting"),
      null, { timeout },
    );
    result.statusBar = (await status.innerText()).trim();
    await shot("01-opened");

    // Type: end of line 1, Enter (Python auto-indents), or TEXT at the end of LINE;
    // then ask for ghost text.
    await page.locator(".monaco-editor .view-lines").first().click();
    if (lineArg) {
      await page.keyboard.press("F1");
      const input = page.locator(".quick-input-widget input");
      await input.waitFor({ state: "visible", timeout: 10000 });
      await input.fill(`:${lineArg}`);
      await page.keyboard.press("Enter");
      await page.keyboard.press("End");
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
      await palette("Trigger Inline Suggestion");
      await ghost.first().waitFor({ timeout: ghostTimeout }).catch(() => {});
    }
    if (await ghost.count()) {
      // The first line is inline decorations (one span per token); further lines
      // are rendered as extra view lines inside .ghost-text.
      const inline = (await page.locator(".monaco-editor .ghost-text-decoration").allInnerTexts()).join("");
      const more = await page.locator(".monaco-editor .ghost-text .view-line").allInnerTexts();
      result.ghost = [inline, ...more].join("\n").replace(/\u00a0/g, " ");
      result.steps.push("ghost");
      await shot("02-ghost-text");
      await page.keyboard.press("Tab");
      await page.waitForTimeout(300);
      result.steps.push("accepted");
    } else {
      result.ghost = null; // test_vscode_e2e.py decides whether that is a failure
      await shot("02-no-ghost-text");
    }
    result.afterAccept = await editorText();
    await page.keyboard.press("Control+s");
    await shot("03-accepted");

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
    await shot("04-suggest");
    await page.keyboard.press("Escape");
    await page.keyboard.press("Control+z");
    await page.keyboard.press("Control+s");

    // Regenerate selection: select line 1 and run the palette command.
    await page.keyboard.press("Control+Home");
    await page.keyboard.press("Shift+End");
    const before = (await editorText()).join("\n");
    await palette("dllm: Regenerate Selection");
    // Either the edit arrives, or the server says why there is none (a toast).
    await page.waitForFunction(
      (prev) => [...document.querySelectorAll(".monaco-editor .view-lines .view-line")]
        .map((e) => e.textContent.replace(/\u00a0/g, " ")).join("\n") !== prev
        || /regenerate/i.test(document.querySelector(".notifications-toasts")?.textContent ?? ""),
      before, { timeout },
    );
    result.toasts = (await page.locator(".notifications-toasts .notification-toast").allInnerTexts());
    result.afterRegenerate = await editorText();
    await page.keyboard.press("Control+s");
    await page.waitForTimeout(500);
    result.steps.push("regenerated");
    await shot("05-regenerated");

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
    const beforeFill = (await editorText()).join("\n");
    await palette("dllm: Fill Holes in File");
    // Wait for the marker itself to go (any other change, e.g. ghost text rendering
    // after the typing, would end the wait before the edit lands), or the server's toast.
    await page.waitForFunction(
      (prev) => prev.includes("{{fill}}") && ![...document.querySelectorAll(".monaco-editor .view-lines .view-line")]
        .map((e) => e.textContent.replace(/\u00a0/g, " ")).join("\n").includes("{{fill}}")
        || /fill holes/i.test(document.querySelector(".notifications-toasts")?.textContent ?? ""),
      beforeFill, { timeout },
    );
    result.afterFill = await editorText();
    result.toasts.push(...(await page.locator(".notifications-toasts .notification-toast").allInnerTexts()));
    await page.keyboard.press("Control+s");
    await page.waitForTimeout(500);
    result.steps.push("filled");
    await shot("06-filled");

    // "Show Engine Status" asks the server (dllm.engineStatus) and shows a toast.
    await palette("dllm: Show Engine Status");
    const toast = page.locator(".notifications-toasts .notification-toast", { hasText: "dllm engine" });
    await toast.first().waitFor({ timeout });
    result.engineStatusToast = (await toast.first().innerText()).replace(/\s+/g, " ");
    await shot("07-engine-status");
    result.ok = true;
  } catch (error) {
    result.ok = false;
    result.error = String(error && error.stack ? error.stack : error);
    if (page) {
      // What the editor and the notifications showed when it failed, for the report.
      result.editorAtFailure = await editorText().catch(() => []);
      result.toastsAtFailure = await page.locator(".notifications-toasts .notification-toast").allInnerTexts()
        .catch(() => []);
      await shot("99-failure").catch(() => {});
    }
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(result) + "\n");
}

await main();
