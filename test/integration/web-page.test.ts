// The built-in page (GET /) in a real browser, headless Chromium. Against `splash serve` on the embedded model it
// streams an answer (the model's own, token counts and text), stops a long one (the server cancels the
// generation) and shows the engine's figures moving; against a scripted server with an API key it asks for the key
// once per tab, folds the reasoning, copies code blocks and keeps markup in answers as text. No console errors
// anywhere. Leaves a screenshot in build/web-page.png (the README shows a copy, docs/web-page.png).
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import type { ServerStatus } from "../../src/server/status.ts";
import { launchBrowser, openPage, type WatchedPage } from "../helpers/browser.ts";
import { repoRoot } from "../helpers/cli.ts";
import { say, ScriptedModel } from "../helpers/scripted-model.ts";
import { startServer, type TestServer } from "../helpers/server.ts";
import { splashServe, type ServeProcess } from "../helpers/splash-serve.ts";

let browser: Browser;

beforeAll(async () => {
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await browser?.close();
});

async function status(url: string): Promise<ServerStatus> {
  return (await (await fetch(`${url}/status`)).json()) as ServerStatus;
}

async function until<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(50);
  }
}

// Records the length of the streaming answer's text at every change the page makes to it.
// Records the streaming answer's length at each change. The responses arrive at 4 KB/s (Chrome's network throttling):
// splash-tiny can finish a short answer within one animation frame, and the page draws once a frame, so without it
// a fast machine would see the whole answer at once. Returns the function that lifts the throttling.
async function recordStreaming(page: Page): Promise<() => Promise<void>> {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("Network.emulateNetworkConditions", { offline: false, latency: 0, downloadThroughput: 4096, uploadThroughput: -1 });
  await page.evaluate(() => {
    const w = window as unknown as { lengths: number[] };
    w.lengths = [];
    const messages = document.getElementById("messages")!;
    new MutationObserver(() => {
      const body = messages.querySelector(".msg.assistant.streaming .body");
      if (body) w.lengths.push(body.textContent!.length);
    }).observe(messages, { subtree: true, childList: true, characterData: true });
  });
  return async () => {
    await cdp.send("Network.emulateNetworkConditions", { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: -1 });
    await cdp.detach();
  };
}

const lastAnswer = (page: Page) => page.locator(".msg.assistant").last();

describe("the page against splash serve on the embedded model", () => {
  let server: ServeProcess;
  let w: WatchedPage;

  beforeAll(async () => {
    server = await splashServe();
    w = await openPage(browser, server.url);
  }, 90_000);

  afterAll(async () => {
    await w?.context.close();
    await server?.stop();
  });

  afterEach(() => {
    expect(w.errors).toEqual([]);
  });

  test("names the model, where it runs and its memory plan", async () => {
    const { page } = w;
    await page.waitForFunction(() => document.getElementById("model-name")?.textContent === "splash-tiny");
    const facts = await page.locator("#model-facts").innerText();
    expect(facts).toContain("backend");
    expect(facts).toMatch(/cpu|vulkan|metal/);
    expect(await page.locator("#memory-plan").innerText()).toMatch(/KV pages\s+\d+ × 64 tokens/);
    expect(await page.locator("#connection").innerText()).toContain("connected");
    expect(await page.locator("#key-button").isHidden()).toBe(true); // no key on this server
  }, 30_000);

  test("streams an answer: the text arrives in pieces, and it is the model's greedy answer", async () => {
    const { page } = w;
    const question = "Write a Python function that reverses a string";
    await page.fill("#temperature", "0");
    await page.fill("#max-tokens", "120");
    const unthrottle = await recordStreaming(page);
    await page.fill("#prompt", question);
    await page.press("#prompt", "Enter");
    await page.waitForSelector(".msg.assistant:not(.streaming)", { timeout: 60_000 });
    await unthrottle();

    const lengths = await page.evaluate(() => (window as unknown as { lengths: number[] }).lengths);
    expect(new Set(lengths.filter((n) => n > 0)).size).toBeGreaterThanOrEqual(3);

    // The same request through the API, not streamed: the page shows that answer, with its token count.
    const res = await fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "splash-tiny", messages: [{ role: "user", content: question }], temperature: 0, max_tokens: 120, chat_template_kwargs: { enable_thinking: true } }),
    });
    const direct = (await res.json()) as { choices: { message: { content: string } }[]; usage: { completion_tokens: number } };
    const answer = lastAnswer(page);
    expect(await answer.locator(".meta").innerText()).toContain(`${direct.usage.completion_tokens} tokens`);
    const { renderMarkdown } = await import("../../src/web/markdown.ts");
    const expected = await page.evaluate((html) => {
      const d = document.createElement("div");
      d.innerHTML = html;
      return d.textContent;
    }, renderMarkdown(direct.choices[0]!.message.content));
    expect(await answer.locator(".body").textContent()).toBe(expected);
  }, 90_000);

  test("Stop ends a long answer and the server cancels its generation; the live figures follow", async () => {
    const { page } = w;
    // At least 256 objects of two 32-character strings: thousands of tokens, which the model may not cut short.
    const item = { type: "object", properties: { name: { type: "string", minLength: 32 }, note: { type: "string", minLength: 32 } }, required: ["name", "note"] };
    await page.check("#use-schema");
    await page.fill("#schema", JSON.stringify({ type: "array", items: item, minItems: 256 }));
    await page.fill("#max-tokens", "8192");
    await page.fill("#prompt", "List people with notes");
    await page.click("#send");
    expect(await page.locator("#stop").isVisible()).toBe(true);
    // The panel sees it running and producing tokens (it polls once a second).
    await page.waitForFunction(() => document.getElementById("running")!.textContent === "1", undefined, { timeout: 30_000 });
    await page.waitForFunction(() => document.getElementById("gen-rate")!.textContent !== "0", undefined, { timeout: 30_000 });
    await page.waitForFunction(() => (document.querySelector(".msg.assistant.streaming .body")?.textContent?.length ?? 0) > 100, undefined, { timeout: 30_000 });
    await page.click("#stop");
    await page.waitForSelector(".msg.assistant:not(.streaming) >> nth=-1");
    expect(await lastAnswer(page).locator(".meta").innerText()).toContain("stopped");
    expect(await page.locator("#send").isVisible()).toBe(true);
    expect(await page.locator("#stop").isHidden()).toBe(true);
    expect((await lastAnswer(page).locator(".body").textContent())!.startsWith("[")).toBe(true);

    // The server ended the generation as cancelled, long before its 8192 tokens, and holds no sequence.
    const s = await until("the cancelled generation", async () => {
      const st = await status(server.url);
      return st.recent[0]?.outcome === "cancelled" && st.models[0]!.engine.running === 0 && st;
    });
    expect(s.recent[0]!.surface).toBe("chat");
    expect(s.recent[0]!.completionTokens).toBeLessThan(8192);
    expect(s.models[0]!.engine.sequenceStateBytes).toBe(0);
    await page.waitForFunction(() => document.getElementById("running")!.textContent === "0");
    await page.uncheck("#use-schema");
  }, 90_000);

  test("the panel shows throughput, cache and speculation figures and the last requests", async () => {
    const { page } = w;
    // The same question again: its prompt comes from the prefix cache.
    await page.fill("#temperature", "0");
    await page.fill("#max-tokens", "60");
    await page.fill("#prompt", "Write a Python function that reverses a string");
    await page.click("#send");
    await page.waitForSelector(".msg.assistant:not(.streaming) >> nth=2", { state: "attached", timeout: 60_000 });
    // Four generations: the page's three and the test's own request; newest first.
    await page.waitForFunction(() => document.querySelectorAll("#recent tr").length === 4);
    const rows = await page.locator("#recent tr").allInnerTexts();
    expect(rows[1]).toContain("cancelled");
    expect(rows.every((r) => r.includes("chat"))).toBe(true);
    await page.waitForFunction(() => document.getElementById("request-counts")!.textContent === "4 ok, 0 failed");
    const st = await status(server.url);
    expect(st.models[0]!.tokens.cachedPromptTokens).toBeGreaterThan(0);
    expect(await page.locator("#cache-hits").innerText()).toMatch(/^\d+(\.\d)?% of \d{1,3}(,\d{3})* prompt tokens$/);
    expect(await page.locator("#speculation").innerText()).toMatch(/^(none|mtp|dflash)/);
    // The chart has drawn the output rate, which was above zero while the long answer ran.
    expect(Math.max(...st.models[0]!.throughput.generated)).toBeGreaterThan(0);
    await page.waitForFunction(() => document.querySelectorAll("#chart polyline.gen").length === 1);

    mkdirSync(join(repoRoot, "build"), { recursive: true });
    await page.screenshot({ path: join(repoRoot, "build", "web-page.png") });
  }, 90_000);

  test("a schema box that is not JSON is caught before sending; a schema the server refuses shows its error", async () => {
    const { page } = w;
    const sent = (await status(server.url)).requests.reduce((n, r) => n + r.count, 0);
    await page.check("#use-schema");
    await page.fill("#schema", "{not json");
    await page.fill("#prompt", "Give me a long string");
    await page.click("#send");
    expect(await page.locator("#schema-error").innerText()).toContain("not valid JSON");
    expect(await page.locator("#prompt").inputValue()).toBe("Give me a long string"); // kept: nothing was sent
    expect((await status(server.url)).requests.reduce((n, r) => n + r.count, 0)).toBe(sent);

    await page.fill("#schema", JSON.stringify({ type: "string", pattern: "(a)\\1" }));
    await page.click("#send");
    await page.waitForSelector(".msg.assistant:not(.streaming) .error-text >> nth=-1", { timeout: 30_000 });
    expect(await lastAnswer(page).locator(".error-text").innerText()).toContain("backreferences are not supported");
    expect(await page.locator("#schema-error").isHidden()).toBe(true);
    expect(w.errors).toEqual([expect.stringContaining("status of 400")]); // the refused request, as Chromium logs it
    w.errors.length = 0;
    await page.uncheck("#use-schema");
  }, 60_000);
});

const MARKDOWN = [
  "Here is the code:",
  "",
  "```python",
  "def add(a, b):",
  "    return a + b",
  "```",
  "",
  '<img src="x" onerror="window.injected = true"> and [a link](javascript:window.injected=true)',
].join("\n");

describe("the page against a server with an API key", () => {
  const model = new ScriptedModel({ id: "scripted", script: () => say({ reasoning: "The user wants an adder.", content: MARKDOWN }) });
  model.tokenDelayMs = 2;
  let server: TestServer;
  let w: WatchedPage;

  beforeAll(async () => {
    server = startServer({ models: [model], apiKey: "sekret" });
    w = await openPage(browser, server.url);
    await w.context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: server.url });
  });

  afterAll(async () => {
    await w?.context.close();
    await server?.stop();
  });

  test("asks for the key: a wrong one is refused, the right one is kept for the tab", async () => {
    const { page } = w;
    await page.waitForSelector("#key-dialog[open]");
    await page.fill("#key-input", "guess");
    await page.press("#key-input", "Enter");
    await page.waitForFunction(() => document.getElementById("key-error")!.textContent === "invalid API key");
    expect(await page.locator("#key-dialog").getAttribute("open")).not.toBeNull();
    await page.fill("#key-input", "sekret");
    await page.press("#key-input", "Enter");
    await page.waitForSelector("#key-dialog:not([open])", { state: "attached" });
    expect(await page.locator("#key-button").isVisible()).toBe(true);
    expect(await page.evaluate(() => sessionStorage.getItem("splash.apiKey"))).toBe("sekret");
    // A reload in the same tab does not ask again. The failed key check above is the one expected console error.
    expect(w.errors).toEqual([expect.stringContaining("401")]);
    w.errors.length = 0;
    await page.reload();
    await page.waitForFunction(() => document.getElementById("model-name")?.textContent === "scripted");
    expect(await page.locator("#key-dialog").getAttribute("open")).toBeNull();
  }, 30_000);

  test("reasoning folded, code blocks copied, markup in answers kept as text", async () => {
    const { page } = w;
    await page.fill("#prompt", "Write an adder");
    await page.click("#send");
    await page.waitForSelector(".msg.assistant:not(.streaming)");
    const answer = lastAnswer(page);
    const reasoning = answer.locator("details.reasoning");
    expect(await reasoning.isVisible()).toBe(true);
    expect(await reasoning.getAttribute("open")).toBeNull();
    expect(await reasoning.locator("summary").innerText()).toMatch(/^Reasoning · \d+\.\d s$/);
    expect(await reasoning.locator(".text").textContent()).toBe("The user wants an adder.");
    await reasoning.locator("summary").click();
    expect(await reasoning.locator(".text").isVisible()).toBe(true);

    await answer.locator("button.copy").click();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe("def add(a, b):\n    return a + b\n");
    expect(await answer.locator("button.copy").innerText()).toBe("Copied");

    const body = answer.locator(".body");
    expect(await body.locator("img").count()).toBe(0);
    expect(await body.locator("a").count()).toBe(0);
    expect(await body.innerText()).toContain('<img src="x" onerror="window.injected = true">');
    expect(await page.evaluate(() => (window as unknown as { injected?: boolean }).injected)).toBeUndefined();
    expect(model.lastCall.options.sampling.temperature).toBe(0.7);
    expect(w.errors).toEqual([]);
  }, 30_000);

  test("multi-turn with the settings of the moment; New chat starts over", async () => {
    const { page } = w;
    await page.fill("#temperature", "1.3");
    await page.fill("#max-tokens", "77");
    await page.uncheck("#thinking");
    await page.fill("#prompt", "And a subtractor?");
    await page.click("#send");
    await page.waitForSelector(".msg.assistant:not(.streaming) >> nth=1", { state: "attached" });
    const { conversation, options } = model.lastCall;
    const text = (m: (typeof conversation.messages)[number]) => m.content.map((p) => (p.type === "text" ? p.text : "")).join("");
    expect(conversation.messages.map((m) => [m.role, text(m)])).toEqual([
      ["user", "Write an adder"],
      ["assistant", MARKDOWN], // the answer, without its reasoning
      ["user", "And a subtractor?"],
    ]);
    expect(options.sampling.temperature).toBe(1.3);
    expect(options.maxTokens).toBe(77);
    expect(conversation.thinking.enabled).toBe(false);

    await page.click("#clear");
    expect(await page.locator(".msg").count()).toBe(0);
    await page.fill("#prompt", "Hello again");
    await page.click("#send");
    await page.waitForSelector(".msg.assistant:not(.streaming)", { state: "attached" });
    expect(model.lastCall.conversation.messages.map((m) => m.role)).toEqual(["user"]);
    expect(w.errors).toEqual([]);
  }, 30_000);
});
