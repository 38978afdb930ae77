// What every e2e scenario does in code-server's workbench (headless Chromium via
// playwright-core): open the folder and a file, wait for the dllm server, run palette
// commands, read the editor, take screenshots. A scenario script imports `session`.
import { chromium } from "playwright-core";
import path from "node:path";

const STATUS_ID = "dllm-lsp.dllm-lsp.dllm.status";

/** Runs `scenario(ui, result)` in a fresh browser on `url`/?folder=`folder`, then prints the
 *  result as one JSON line (ok, error, what the editor showed at a failure). */
export async function session({ url, folder, shots, file }, scenario) {
  const result = { steps: [] };
  const browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
  });
  let ui;
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    ui = workbench(page, shots);
    await page.goto(`${url}/?folder=${encodeURIComponent(folder)}`);
    await page.locator(".monaco-workbench").waitFor({ timeout: 60000 });
    const row = page.locator(".explorer-folders-view .monaco-list-row", { hasText: file });
    await row.waitFor({ timeout: 30000 });
    await row.click();
    await page.locator(".monaco-editor .view-lines").first().waitFor({ timeout: 20000 });
    result.steps.push("opened");
    await scenario(ui, result);
    result.ok = true;
  } catch (error) {
    result.ok = false;
    result.error = String(error && error.stack ? error.stack : error);
    if (ui) {
      // What the editor and the notifications showed when it failed, for the report.
      result.editorAtFailure = await ui.editorText().catch(() => []);
      result.toastsAtFailure = await ui.page.locator(".notifications-toasts .notification-toast").allInnerTexts()
        .catch(() => []);
      await ui.shot("99-failure").catch(() => {});
    }
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(result) + "\n");
}

function workbench(page, shots) {
  const ui = {
    page,
    async shot(name) {
      await page.screenshot({ path: path.join(shots, `${name}.png`) });
    },
    async palette(command) {
      await page.keyboard.press("F1");
      const input = page.locator(".quick-input-widget input");
      await input.waitFor({ state: "visible", timeout: 10000 });
      await input.fill(`>${command}`);
      // Click the row that names the command: Enter runs the focused row, which can
      // still be a recently-used command while the list is being filtered.
      const row = page.locator(".quick-input-list .monaco-list-row", { hasText: command }).first();
      await row.waitFor({ timeout: 10000 });
      await row.click();
    },
    /** Go to Line (1-based) and column (1-based; default: the end of that line). */
    async goToLine(line, column) {
      await page.keyboard.press("F1");
      const input = page.locator(".quick-input-widget input");
      await input.waitFor({ state: "visible", timeout: 10000 });
      await input.fill(column ? `:${line}:${column}` : `:${line}`);
      await page.keyboard.press("Enter");
      // Keys pressed while the quick input is still closing are lost.
      await input.waitFor({ state: "hidden", timeout: 10000 });
      if (!column) {
        await page.keyboard.press("End");
      }
    },
    async editorText() {
      // In screen order: Monaco reuses a view line's element, so after a line is inserted the
      // DOM order is not the order on screen (each sits at its own style.top). Monaco renders
      // spaces as U+00A0.
      const lines = await page.locator(".monaco-editor .view-lines .view-line").evaluateAll((els) =>
        els.map((el) => [parseFloat(el.style.top) || 0, el.innerText])
          .sort((a, b) => a[0] - b[0]).map(([, text]) => text));
      return lines.map((l) => l.replace(/\u00a0/g, " "));
    },
    /** The extension's status-bar item: "starting" until the server's first dllm/status
     *  notification, "loading" while the engine loads the model. */
    async waitForServer(timeout) {
      const status = page.locator(`[id="${STATUS_ID}"]`);
      await status.waitFor({ timeout });
      await page.waitForFunction(
        (id) => !/starting|loading/.test(document.getElementById(id)?.textContent ?? "starting"),
        STATUS_ID, { timeout },
      );
      return (await status.innerText()).trim();
    },
  };
  return ui;
}

/** argv after the script: URL FOLDER SHOTS FILE, then the scenario's own. */
export function args() {
  const [url, folder, shots, file, ...rest] = process.argv.slice(2);
  return { url, folder, shots, file, rest };
}
