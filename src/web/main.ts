/// <reference lib="dom" />
// The built-in page (GET /): a chat with the served model beside the engine's live figures. Bundled with its
// dependencies into one HTML document by bundle.ts; it talks only to the server that served it.
import type { ServerStatus } from "../server/status.ts";
import { authHeaders, ensureAccess, failure, forgetKey } from "./api.ts";
import { Chat } from "./chat.ts";
import { showFigures, showModel } from "./engine.ts";
import { copyCodeBlock } from "./markdown.ts";

const POLL_MS = 1000;

const $ = <T extends HTMLElement = HTMLElement>(id: string) => document.getElementById(id) as T;
const dialog = $<HTMLDialogElement>("key-dialog");
const prompt = $<HTMLTextAreaElement>("prompt");
const send = $<HTMLButtonElement>("send");
const stop = $<HTMLButtonElement>("stop");
const schemaBox = $("schema-box");
const schemaError = $("schema-error");
const connection = $("connection");

let model: string | undefined;
let keyRequired = false; // from GET /status

async function askForKey(): Promise<void> {
  forgetKey();
  await ensureAccess(dialog, keyRequired);
}

const chat = new Chat(
  $("messages"),
  $("empty"),
  askForKey,
  (busy) => {
    send.hidden = busy;
    stop.hidden = !busy;
  },
);

// The JSON Schema box's content as an object, or a message saying what is wrong with it.
function schema(): { value?: Record<string, unknown>; error?: string } {
  if (!$<HTMLInputElement>("use-schema").checked) return {};
  try {
    const value: unknown = JSON.parse($<HTMLTextAreaElement>("schema").value);
    if (typeof value !== "object" || value === null || Array.isArray(value)) return { error: "the schema must be a JSON object" };
    return { value: value as Record<string, unknown> };
  } catch (e) {
    return { error: `the schema is not valid JSON: ${e instanceof Error ? e.message : String(e)}` };
  }
}

function submit(): void {
  const text = prompt.value.trim();
  if (!text || chat.busy || !model) return;
  const s = schema();
  schemaError.hidden = s.error === undefined;
  schemaError.textContent = s.error ?? "";
  if (s.error) return;
  prompt.value = "";
  const number = (id: string, fallback: number) => {
    const v = Number($<HTMLInputElement>(id).value);
    return Number.isFinite(v) ? v : fallback;
  };
  void chat.send(text, {
    model,
    temperature: number("temperature", 0.7),
    maxTokens: Math.max(1, Math.round(number("max-tokens", 1024))),
    thinking: $<HTMLInputElement>("thinking").checked,
    ...(s.value ? { schema: s.value } : {}),
  });
}

$("composer").addEventListener("submit", (e) => {
  e.preventDefault();
  submit();
});
prompt.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    submit();
  }
});
stop.addEventListener("click", () => chat.stop());
$("clear").addEventListener("click", () => chat.clear());
$("use-schema").addEventListener("change", (e) => (schemaBox.hidden = !(e.target as HTMLInputElement).checked));
$("messages").addEventListener("click", (e) => void copyCodeBlock(e));
$("key-button").addEventListener("click", () => void askForKey());

// Polls GET /status while the tab is visible; the first answer names the model.
async function poll(): Promise<void> {
  try {
    const res = await fetch("/status", { headers: authHeaders() });
    if (!res.ok) throw await failure(res);
    const status = (await res.json()) as ServerStatus;
    keyRequired = status.keyRequired;
    const m = status.models[0];
    if (m) {
      if (model !== m.id) {
        model = m.id;
        $("model-name").textContent = m.id;
        document.title = `Splash · ${m.id}`;
        showModel(m);
      }
      showFigures(status, m);
    }
    connection.textContent = `connected · up ${uptime(status.uptimeSeconds)}`;
    connection.className = "connection up";
  } catch (e) {
    connection.textContent = `unreachable: ${e instanceof Error ? e.message : String(e)}`;
    connection.className = "connection down";
  }
}

function uptime(seconds: number): string {
  if (seconds < 60) return `${Math.floor(seconds)} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min`;
  return `${Math.floor(seconds / 3600)} h ${Math.floor((seconds % 3600) / 60)} min`;
}

async function loop(): Promise<void> {
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    if (document.visibilityState === "visible") await poll();
  }
}

async function start(): Promise<void> {
  await poll();
  void loop();
  try {
    $("key-button").hidden = !(await ensureAccess(dialog, keyRequired));
  } catch (e) {
    connection.textContent = `unreachable: ${e instanceof Error ? e.message : String(e)}`;
    connection.className = "connection down";
  }
  prompt.focus();
}

void start();
