// A server given with --url instead of a local one: another machine's `splash serve --host …`, or vLLM / SGLang
// serving the same checkpoints. Before the tool starts, the launcher asks the server what it serves (GET /v1/models)
// and whether it has the API the tool speaks (an empty POST to that endpoint: a missing route answers 404 or 405,
// an existing one refuses the empty body with a 4xx of its own; no generation runs). Anything missing is said in
// words, with what to do about it.
import { z } from "zod";
import { CliError } from "../cli/_command.ts";
import type { Tool } from "./tool.ts";

// What a remote server tells about the model: Splash's context_length and max_output_tokens, vLLM's and SGLang's
// max_model_len.
const ModelEntry = z.object({
  id: z.string().min(1),
  context_length: z.number().int().positive().optional(),
  max_model_len: z.number().int().positive().optional(),
  max_output_tokens: z.number().int().positive().optional(),
});
const ModelList = z.object({ data: z.array(z.unknown()) });

// Assumed when a server does not say its context length (tools compact early rather than overflow).
export const UNKNOWN_CONTEXT = 32768;

export type RemoteServer = { baseUrl: string; apiKey: string; model: string; contextLength: number; maxOutputTokens: number; notes: string[] };

// The base URL a tool is given: no trailing slash and no /v1 (each tool adds its own path).
export function remoteBase(url: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new CliError(`--url ${url} is not a URL`, "give the server's address, e.g. http://gpu-box:8000 or http://gpu-box:8000/v1");
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") throw new CliError(`--url ${url}: expected an http:// or https:// address`);
  if (u.search || u.hash) throw new CliError(`--url ${url}: expected the server's base address, without a query`);
  return `${u.origin}${u.pathname.replace(/\/+$/, "").replace(/\/v1$/, "")}`;
}

function headers(apiKey: string): Record<string, string> {
  return { authorization: `Bearer ${apiKey}`, "x-api-key": apiKey, "anthropic-version": "2023-06-01", "content-type": "application/json" };
}

// A short reason from an error body in either surface's shape, or its first line.
function reason(text: string): string {
  try {
    const body = JSON.parse(text) as { error?: { message?: string } | string; message?: string; detail?: unknown };
    const msg = typeof body.error === "string" ? body.error : (body.error?.message ?? body.message ?? (typeof body.detail === "string" ? body.detail : undefined));
    if (msg) return msg;
  } catch {
    // not JSON
  }
  return text.split("\n")[0]!.slice(0, 200);
}

async function request(url: string, init: RequestInit): Promise<Response> {
  try {
    return await fetch(url, { ...init, signal: AbortSignal.timeout(15_000), redirect: "follow" });
  } catch (e) {
    const cause = e instanceof Error ? ((e.cause as Error | undefined)?.message ?? e.message) : String(e);
    throw new CliError(`cannot reach ${url}: ${cause}`, "is the server running, and is the address (and port) right?");
  }
}

// Which model to use and its limits, from GET /v1/models.
async function chooseModel(base: string, apiKey: string, wanted: string | undefined): Promise<Omit<RemoteServer, "baseUrl" | "apiKey">> {
  const url = `${base}/v1/models`;
  const res = await request(url, { headers: headers(apiKey) });
  const text = await res.text();
  if (res.status === 401 || res.status === 403) {
    throw new CliError(`${base} refused the API key (HTTP ${res.status}: ${reason(text)})`, "pass the server's key with --api-key");
  }
  if (!res.ok) throw new CliError(`${url} answered HTTP ${res.status}: ${reason(text)}`, "give the base address of an OpenAI-compatible server (Splash, vLLM, SGLang), e.g. http://gpu-box:8000");
  let list;
  try {
    list = ModelList.parse(JSON.parse(text));
  } catch {
    throw new CliError(`${url} did not answer with a model list`, "give the base address of an OpenAI-compatible server (Splash, vLLM, SGLang)");
  }
  const entries = list.data.flatMap((e) => {
    const parsed = ModelEntry.safeParse(e);
    return parsed.success ? [parsed.data] : [];
  });
  if (entries.length === 0) throw new CliError(`${base} serves no model`, "start the server with a model");
  const ids = entries.map((e) => e.id).join(", ");
  let entry;
  if (wanted !== undefined) {
    entry = entries.find((e) => e.id === wanted);
    if (!entry) throw new CliError(`${base} does not serve ${wanted}; it serves: ${ids}`, "pick one of those with --model");
  } else {
    if (entries.length > 1) throw new CliError(`${base} serves several models (${ids})`, "pick one with --model");
    entry = entries[0]!;
  }
  const notes: string[] = [];
  let contextLength = entry.context_length ?? entry.max_model_len;
  if (contextLength === undefined) {
    contextLength = UNKNOWN_CONTEXT;
    notes.push(`${base} does not say the context length of ${entry.id}; assuming ${UNKNOWN_CONTEXT} tokens`);
  }
  // Without a stated output cap, a quarter of the context keeps room for the conversation.
  const maxOutputTokens = Math.min(entry.max_output_tokens ?? Math.floor(contextLength / 4), contextLength);
  return { model: entry.id, contextLength, maxOutputTokens, notes };
}

// Throws when the server has no route for the tool's API.
async function checkEndpoint(base: string, apiKey: string, tool: Tool): Promise<void> {
  const url = `${base}${tool.endpoint}`;
  const res = await request(url, { method: "POST", headers: headers(apiKey), body: "{}" });
  await res.body?.cancel();
  if (res.status === 404 || res.status === 405 || res.status === 501) {
    throw new CliError(
      `${base} does not serve the ${tool.api} API (POST ${tool.endpoint} answered HTTP ${res.status}), which ${tool.title} speaks`,
      `serve the model with Splash, vLLM or SGLang (each has Chat Completions, Responses and Messages), or use a launcher whose tool speaks an API this server has`,
    );
  }
}

export async function remoteServer(tool: Tool, url: string, apiKey: string | undefined, model: string | undefined): Promise<RemoteServer> {
  const base = remoteBase(url);
  // Servers without a key accept any; the tools need one to send.
  const key = apiKey ?? "none";
  const chosen = await chooseModel(base, key, model);
  await checkEndpoint(base, key, tool);
  return { baseUrl: base, apiKey: key, ...chosen };
}
