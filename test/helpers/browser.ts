// Headless Chromium for tests of the built-in page: Debian's `chromium` (the test command installs it; on a Mac,
// Google Chrome or Chromium where they are), driven by playwright-core, which downloads no browser of its own. Every page records the console errors and uncaught
// exceptions it sees, so a test can require there were none.
import { existsSync } from "node:fs";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";

const CANDIDATES = [
  "/usr/bin/chromium",
  "/usr/bin/chromium-browser",
  "/usr/bin/google-chrome",
  "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome",
  "/Applications/Chromium.app/Contents/MacOS/Chromium",
];

export function chromiumPath(): string {
  const path = process.env.CHROMIUM_PATH ?? CANDIDATES.find((p) => existsSync(p));
  if (!path) throw new Error(`no Chromium found (looked for ${CANDIDATES.join(", ")}; set CHROMIUM_PATH): the test command installs Debian's chromium`);
  return path;
}

export function launchBrowser(): Promise<Browser> {
  // --no-sandbox: as root (CI), Chromium's sandbox refuses to start
  return chromium.launch({ executablePath: chromiumPath(), args: process.getuid?.() === 0 ? ["--no-sandbox"] : [] });
}

export type WatchedPage = { page: Page; context: BrowserContext; errors: string[] };

export async function openPage(browser: Browser, url: string): Promise<WatchedPage> {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(m.text());
  });
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(url);
  return { page, context, errors };
}
