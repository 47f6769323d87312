// The request log: one line per request on stderr once its answer is complete (a stream: after its last event), so
// a launcher's server log shows what an agent asked and what it got.
//
//   text  2026-12-01T10:00:00.000Z POST /v1/messages 200 model=qwen3.8-27b prompt=5210 cached=5120 completion=42
//         ttft=180ms total=1312ms finish=tool_calls client=127.0.0.1 agent="claude-cli/2.1.197"
//   json  {"time":"…","method":"POST","path":"/v1/messages","status":200,"model":"qwen3.8-27b","prompt_tokens":5210,…}
//
// A request is recorded from its arrival (the server stamps it before the body is read, so TTFT includes parsing);
// the generation fills in the model, tokens and finish reason as they pass.
import type { FinishReason, Usage } from "../chat/ir.ts";

export const LOG_FORMATS = ["text", "json"] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

export type RequestRecord = {
  readonly method: string;
  readonly path: string;
  readonly arrivedAt: number; // performance.now()
  readonly agent?: string; // User-Agent
  client?: string; // the peer's address
  model?: string;
  usage?: Usage;
  firstTokenAt?: number; // performance.now() of the first output token
  finish?: FinishReason;
  error?: string; // what the client was told went wrong
  streaming?: boolean; // a stream's line is written when it ends, not when its headers are
  ended?: boolean;
};

export class RequestLog {
  private readonly records = new WeakMap<Request, RequestRecord>();

  // `format` undefined: requests are recorded (generations read their arrival time) but no line is written.
  constructor(
    private readonly format: LogFormat | undefined,
    private readonly write: (line: string) => void = (line) => console.error(line),
  ) {}

  // The record of a request, made at its first sight (by the listener, which knows the peer, or by the app).
  begin(request: Request, client?: string): RequestRecord {
    let record = this.records.get(request);
    if (!record) {
      const agent = request.headers.get("user-agent") ?? undefined;
      record = { method: request.method, path: new URL(request.url).pathname, arrivedAt: performance.now(), agent };
      this.records.set(request, record);
    }
    if (client !== undefined) record.client = client;
    return record;
  }

  // The request is answered in full; only the first call for a record writes its line.
  end(record: RequestRecord, status: number): void {
    if (record.ended) return;
    record.ended = true;
    if (this.format === undefined) return;
    const fields = requestFields(record, status);
    this.write(this.format === "json" ? JSON.stringify(fields) : textLine(fields));
  }
}

type Fields = {
  time: string;
  method: string;
  path: string;
  status: number;
  model?: string;
  prompt_tokens?: number;
  cached_tokens?: number;
  completion_tokens?: number;
  ttft_ms?: number;
  total_ms: number;
  finish_reason?: FinishReason;
  error?: string;
  client?: string;
  agent?: string;
};

function requestFields(r: RequestRecord, status: number): Fields {
  const now = performance.now();
  return {
    time: new Date().toISOString(),
    method: r.method,
    path: r.path,
    status,
    model: r.model,
    prompt_tokens: r.usage?.promptTokens,
    cached_tokens: r.usage?.cachedPromptTokens,
    completion_tokens: r.usage?.completionTokens,
    ttft_ms: r.firstTokenAt === undefined ? undefined : Math.round(r.firstTokenAt - r.arrivedAt),
    total_ms: Math.round(now - r.arrivedAt),
    finish_reason: r.finish,
    error: r.error,
    client: r.client,
    agent: r.agent,
  };
}

// Short names for the text line, in the order they are written after `time method path status`.
const TEXT_NAMES: [keyof Fields, string, string?][] = [
  ["model", "model"],
  ["prompt_tokens", "prompt"],
  ["cached_tokens", "cached"],
  ["completion_tokens", "completion"],
  ["ttft_ms", "ttft", "ms"],
  ["total_ms", "total", "ms"],
  ["finish_reason", "finish"],
  ["error", "error"],
  ["client", "client"],
  ["agent", "agent"],
];

// A value is quoted (as a JSON string) when it has a space, a quote or a control character in it.
const textValue = (v: string | number) => (typeof v === "string" && (v === "" || /[\s"\\\x00-\x1f\x7f]/.test(v)) ? JSON.stringify(v) : String(v));

function textLine(f: Fields): string {
  const parts = [f.time, f.method, textValue(f.path), String(f.status)];
  for (const [key, name, unit] of TEXT_NAMES) {
    const v = f[key];
    if (v !== undefined) parts.push(`${name}=${textValue(v)}${unit ?? ""}`);
  }
  return parts.join(" ");
}
