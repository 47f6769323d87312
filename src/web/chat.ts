/// <reference lib="dom" />
// The chat: a multi-turn conversation with the served model over POST /v1/chat/completions, streamed. Reasoning
// is shown folded above the answer; Stop aborts the request, which cancels the generation on the server.
import type { ChatRequest } from "../api/openai-chat/schema.ts";
import { authHeaders, failure, sseData } from "./api.ts";
import { renderMarkdown } from "./markdown.ts";

export type ChatSettings = {
  model: string;
  temperature: number;
  maxTokens: number;
  thinking: boolean;
  schema?: Record<string, unknown>; // answers must match this JSON Schema
};

// What the page reads of a streamed chunk (OpenAI's chat.completion.chunk, or an error frame).
type StreamChunk = {
  choices?: { delta?: { content?: string | null; reasoning_content?: string | null }; finish_reason?: string | null }[];
  usage?: { prompt_tokens: number; completion_tokens: number; prompt_tokens_details?: { cached_tokens?: number } } | null;
  error?: { message?: string };
};

type Turn = { role: "user" | "assistant"; content: string };

// One assistant message on screen, updated as the stream arrives (rendered at most once a frame).
class AnswerView {
  readonly root: HTMLElement;
  private details: HTMLDetailsElement;
  private summary: HTMLElement;
  private reasoningText: HTMLElement;
  private body: HTMLElement;
  private meta: HTMLElement;
  reasoning = "";
  content = "";
  private pending = false;

  constructor(
    model: string,
    private json: boolean,
  ) {
    this.root = div("msg assistant streaming");
    const role = div("role");
    role.textContent = model;
    this.details = document.createElement("details");
    this.details.className = "reasoning";
    this.details.hidden = true;
    this.summary = document.createElement("summary");
    this.summary.textContent = "Reasoning…";
    this.reasoningText = div("text");
    this.details.append(this.summary, this.reasoningText);
    this.body = div(json ? "body json" : "body");
    this.meta = div("meta");
    this.root.append(role, this.details, this.body, this.meta);
  }

  update(): void {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => this.render());
  }

  render(): void {
    this.pending = false;
    if (this.reasoning) {
      this.details.hidden = false;
      this.reasoningText.textContent = this.reasoning;
    }
    if (this.json) this.body.textContent = this.content;
    else this.body.innerHTML = renderMarkdown(this.content);
  }

  finish(summary: string | undefined, meta: string): void {
    this.render();
    if (this.json) {
      try {
        this.body.textContent = JSON.stringify(JSON.parse(this.content), null, 2);
      } catch {
        // cut short or not JSON: shown as it came
      }
    }
    if (summary) this.summary.textContent = summary;
    this.meta.textContent = meta;
    this.root.classList.remove("streaming");
  }

  fail(message: string): void {
    this.finish(undefined, "");
    const error = div("error-text");
    error.textContent = message;
    this.root.append(error);
  }
}

function div(className: string): HTMLDivElement {
  const d = document.createElement("div");
  d.className = className;
  return d;
}

export class Chat {
  private history: Turn[] = [];
  private controller: AbortController | undefined;

  constructor(
    private messages: HTMLElement,
    private empty: HTMLElement,
    private reauthenticate: () => Promise<void>, // after a 401: asks for the key again
    private onBusy: (busy: boolean) => void,
  ) {}

  get busy(): boolean {
    return this.controller !== undefined;
  }

  stop(): void {
    this.controller?.abort();
  }

  clear(): void {
    this.stop();
    this.history = [];
    this.messages.replaceChildren(this.empty);
  }

  async send(text: string, settings: ChatSettings): Promise<void> {
    if (this.busy) return;
    this.empty.remove();
    const user = div("msg user");
    const body = div("body");
    body.textContent = text;
    user.append(body);
    this.messages.append(user);
    this.history.push({ role: "user", content: text });
    const view = new AnswerView(settings.model, settings.schema !== undefined);
    this.messages.append(view.root);
    this.scroll(true);

    const controller = new AbortController();
    this.controller = controller;
    this.onBusy(true);
    const started = performance.now();
    let firstAt: number | undefined;
    let reasoningEndAt: number | undefined;
    let finish: string | undefined;
    let usage: StreamChunk["usage"];
    try {
      let res = await this.post(settings, controller.signal);
      if (res.status === 401) {
        await this.reauthenticate();
        res = await this.post(settings, controller.signal);
      }
      if (!res.ok) throw await failure(res);
      for await (const data of sseData(res.body!)) {
        if (data === "[DONE]") break;
        const chunk = JSON.parse(data) as StreamChunk;
        if (chunk.error) throw new Error(chunk.error.message ?? "the stream failed");
        if (chunk.usage) usage = chunk.usage;
        const choice = chunk.choices?.[0];
        if (!choice) continue;
        const { reasoning_content: r, content: c } = choice.delta ?? {};
        if (r || c) firstAt ??= performance.now();
        if (r) view.reasoning += r;
        if (c) {
          if (view.reasoning) reasoningEndAt ??= performance.now();
          view.content += c;
        }
        if (choice.finish_reason) finish = choice.finish_reason;
        view.update();
        this.scroll(false);
      }
    } catch (e) {
      if (!controller.signal.aborted) {
        this.history.pop(); // the user's message was not answered: it can be sent again
        view.fail(e instanceof Error ? e.message : String(e));
        return;
      }
      finish = "stopped";
    } finally {
      this.controller = undefined;
      this.onBusy(false);
    }
    if (view.content) this.history.push({ role: "assistant", content: view.content });
    const reasoningSeconds = firstAt !== undefined && view.reasoning ? ((reasoningEndAt ?? performance.now()) - firstAt) / 1000 : undefined;
    view.finish(reasoningSeconds === undefined ? undefined : `Reasoning · ${reasoningSeconds.toFixed(1)} s`, describe(started, firstAt, usage, finish));
    this.scroll(false);
  }

  private post(s: ChatSettings, signal: AbortSignal): Promise<Response> {
    const body: ChatRequest = {
      model: s.model,
      messages: this.history,
      stream: true,
      stream_options: { include_usage: true },
      temperature: s.temperature,
      max_tokens: s.maxTokens,
      chat_template_kwargs: { enable_thinking: s.thinking },
      ...(s.schema ? { response_format: { type: "json_schema" as const, json_schema: { name: "answer", schema: s.schema, strict: true } } } : {}),
    };
    return fetch("/v1/chat/completions", { method: "POST", headers: { "content-type": "application/json", ...authHeaders() }, body: JSON.stringify(body), signal });
  }

  // Follows the stream while the reader is at the bottom (always for a new message).
  private scroll(force: boolean): void {
    const m = this.messages;
    if (force || m.scrollHeight - m.scrollTop - m.clientHeight < 80) m.scrollTop = m.scrollHeight;
  }
}

// "123 tokens · 45.6 tok/s · first token 120 ms · 64 of 80 prompt tokens cached · stop"
function describe(started: number, firstAt: number | undefined, usage: StreamChunk["usage"], finish: string | undefined): string {
  const parts: string[] = [];
  const end = performance.now();
  if (usage) {
    parts.push(`${usage.completion_tokens} tokens`);
    if (firstAt !== undefined && usage.completion_tokens > 1 && end > firstAt) parts.push(`${((usage.completion_tokens - 1) / ((end - firstAt) / 1000)).toFixed(1)} tok/s`);
  }
  if (firstAt !== undefined) parts.push(`first token ${Math.round(firstAt - started)} ms`);
  if (usage) parts.push(`${usage.prompt_tokens_details?.cached_tokens ?? 0} of ${usage.prompt_tokens} prompt tokens cached`);
  if (finish) parts.push(finish);
  return parts.join(" · ");
}
