// The streaming parser of a Qwen3.5-family answer: decoded text in, ChatEvents out. It separates reasoning
// (`<think>…</think>`, also when the prompt already opened `<think>`), visible content, and XML tool calls:
//
//   <tool_call>
//   <function=NAME>
//   <parameter=ARG>
//   VALUE
//   </parameter>
//   …
//   </function>
//   </tool_call>
//
// several per turn. Events go out as early as is safe: text waits only while it could still be the start of a tag
// (and newlines wait to see whether a tag follows: the template puts "\n\n" between content and a call, and "\n"
// around reasoning), a call's name goes out as soon as its `>` arrives, string arguments stream as JSON-escaped
// pieces, other arguments go out whole once parsed by the tool's schema (coerce.ts). The deltas of a call concatenate
// to JSON.stringify of its final arguments.
//
// The parser only ever decides on text it holds in `buf`, never on how that text was split into pushes, so any
// split of the same text gives the same events (after merging adjacent deltas); test/unit/chat/output-parser.test.ts checks it
// over random splits. Markup it cannot read is never dropped: before a call's name is known it is passed on as
// content, after that it closes the call with what was parsed; both are logged.
import { log } from "../log.ts";
import { coerceParameter, isStringOnly } from "./coerce.ts";
import type { ChatEvent, JsonSchema, ToolCall, ToolDef } from "./ir.ts";

export type ParserEvent = Extract<ChatEvent, { type: "reasoning" | "content" | "tool_call_start" | "tool_call_delta" | "tool_call_end" }>;

export type OutputParserOptions = {
  tools: ToolDef[]; // the tools offered (ir.ts offeredTools): a call to any other name stays text
  // The rendered prompt ended inside an open <think> block (thinking on, the Qwen3.5 generation prompt).
  startInReasoning: boolean;
  // Makes tool-call ids; the default is random ("call_" + 24 characters).
  newToolCallId?: () => string;
  // Set when a grammar wrote the answer (structured output, src/engine/grammar): the parser then reads it exactly as
  // the grammar wrote it. Reasoning is only where the prompt opened it. `calls` says where tool calls may start: "never" (a JSON answer, whose strings may hold
  // "<tool_call>"), "leading" (the answer is either a JSON value or calls), "anywhere" (text, then calls). A parameter
  // value ends only at "\n</parameter>": raw text never holds "</parameter>" and JSON text never a raw newline, so
  // the first one is the end (an unconstrained model's missing close tags are not to be guessed at).
  constrained?: { calls: "never" | "leading" | "anywhere" };
};

const THINK_OPEN = "<think>";
const THINK_CLOSE = "</think>";
const CALL_OPEN = "<tool_call>";
const CALL_CLOSE = "</tool_call>";
const FUNCTION_OPEN = "<function=";
const FUNCTION_CLOSE = "</function>";
const PARAM_OPEN = "<parameter=";
const PARAM_CLOSE = "</parameter>";
// What can end a parameter's value: its close tag, or (missing that) the next parameter or the end of the call.
const VALUE_ENDS = [PARAM_CLOSE, PARAM_OPEN, FUNCTION_CLOSE, CALL_CLOSE];
// What ends it in constrained output: the close tag after the format's newline.
const CONSTRAINED_VALUE_ENDS = [`\n${PARAM_CLOSE}`];

// Length of the longest suffix of `s` that is a proper prefix of one of `tags` (text that must wait).
function partialTagSuffix(s: string, tags: readonly string[]): number {
  let best = 0;
  for (const tag of tags) {
    for (let n = Math.min(tag.length - 1, s.length); n > best; n--) {
      if (s.endsWith(tag.slice(0, n))) {
        best = n;
        break;
      }
    }
  }
  return best;
}

function trimTrailingNewlines(s: string): string {
  let end = s.length;
  while (end > 0 && s[end - 1] === "\n") end--;
  return s.slice(0, end);
}

function randomId(): string {
  const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  let id = "call_";
  for (const b of crypto.getRandomValues(new Uint8Array(24))) id += alphabet[b % alphabet.length];
  return id;
}

type Call = {
  index: number;
  id: string;
  name: string;
  args: Record<string, unknown>;
  nParams: number;
  // The parameter being read: its text so far (after the format newline), and for a streamed string how much of
  // it went out.
  param?: { name: string; streaming: boolean; schema: JsonSchema | undefined; text: string; leadDone: boolean; started: boolean; sent: number };
};

type State =
  | { kind: "reasoning"; atStart: boolean }
  | { kind: "content"; atStart: boolean; afterCall: boolean }
  | { kind: "call-open"; raw: string } // after <tool_call>, before the name is known
  | { kind: "call"; call: Call; phase: "params" | "value" | "close" };

export class OutputParser {
  private buf = "";
  private state: State;
  private events: ParserEvent[] = [];
  private changed = false; // a step changed state without consuming text (drain goes on)
  private nCalls = 0;
  private readonly calls: ToolCall[] = [];
  private readonly tools: Map<string, ToolDef>;
  private readonly newId: () => string;
  private readonly constrained: OutputParserOptions["constrained"];
  private callsPossible: boolean; // a <tool_call> may still start a call

  constructor(options: OutputParserOptions) {
    this.tools = new Map(options.tools.map((t) => [t.name, t]));
    this.newId = options.newToolCallId ?? randomId;
    this.constrained = options.constrained;
    this.callsPossible = this.tools.size > 0 && options.constrained?.calls !== "never";
    this.state = options.startInReasoning ? { kind: "reasoning", atStart: true } : { kind: "content", atStart: true, afterCall: false };
  }

  // True while the text being read is reasoning (counts reasoning tokens).
  get inReasoning(): boolean {
    return this.state.kind === "reasoning";
  }

  // True while the text being read is visible content (not reasoning, format newlines or tool-call markup).
  get inContent(): boolean {
    return this.state.kind === "content" && !this.state.atStart;
  }

  // The tool calls completed so far.
  get toolCalls(): readonly ToolCall[] {
    return this.calls;
  }

  push(text: string): ParserEvent[] {
    this.buf += text;
    this.drain(false);
    return this.take();
  }

  // The end of the answer: whatever is held goes out.
  finish(): ParserEvent[] {
    this.drain(true);
    return this.take();
  }

  private take(): ParserEvent[] {
    const e = this.events;
    this.events = [];
    return e;
  }

  private emit(type: "reasoning" | "content", text: string): void {
    if (text) this.events.push({ type, text });
  }

  // Consumes as much of buf as can be decided; `final` = no more text will come.
  private drain(final: boolean): void {
    for (;;) {
      const before = this.buf.length;
      const kind = this.state.kind;
      if (kind === "reasoning") this.reasoning(final);
      else if (kind === "content") this.content(final);
      else if (kind === "call-open") this.callOpen(final);
      else this.call(final);
      // Stop when a step neither consumed text nor changed state: it waits for more.
      if (this.buf.length === before && this.state.kind === kind && !this.changed) break;
      this.changed = false;
    }
  }

  private setState(s: State): void {
    this.state = s;
    this.changed = true;
  }

  private reasoning(final: boolean): void {
    const st = this.state as Extract<State, { kind: "reasoning" }>;
    if (st.atStart) {
      // The model's "\n" after <think> is format, not reasoning.
      const lead = this.buf.length - this.buf.replace(/^\n+/, "").length;
      this.buf = this.buf.slice(lead);
      if (this.buf.length === 0 && !final) return;
      st.atStart = false;
      this.changed = true;
    }
    const i = this.buf.indexOf(THINK_CLOSE);
    if (i >= 0) {
      this.emit("reasoning", trimTrailingNewlines(this.buf.slice(0, i)));
      this.buf = this.buf.slice(i + THINK_CLOSE.length);
      this.setState({ kind: "content", atStart: true, afterCall: false });
      return;
    }
    if (final) {
      this.emit("reasoning", this.buf);
      this.buf = "";
      return;
    }
    const keep = partialTagSuffix(this.buf, [THINK_CLOSE]);
    const body = this.buf.slice(0, this.buf.length - keep);
    const out = trimTrailingNewlines(body);
    this.emit("reasoning", out);
    this.buf = this.buf.slice(out.length);
  }

  private content(final: boolean): void {
    const st = this.state as Extract<State, { kind: "content" }>;
    if (st.atStart) {
      // Newlines after </think> or between calls are format; an answer may also open its own <think> first.
      const lead = this.buf.length - this.buf.replace(/^\n+/, "").length;
      this.buf = this.buf.slice(lead);
      if (this.buf.length === 0 && !final) return;
      // (Under a grammar the reasoning is where the prompt put it: a "<think>" the answer writes is text.)
      if (!st.afterCall && !this.constrained) {
        if (this.buf.startsWith(THINK_OPEN)) {
          this.buf = this.buf.slice(THINK_OPEN.length);
          this.setState({ kind: "reasoning", atStart: true });
          return;
        }
        if (THINK_OPEN.startsWith(this.buf) && !final) return;
      }
      if (this.constrained?.calls === "leading" && !this.buf.startsWith(CALL_OPEN)) {
        if (CALL_OPEN.startsWith(this.buf) && !final) return;
        this.callsPossible = false; // a JSON answer
      }
      st.atStart = false;
      this.changed = true;
    }
    const i = this.callsPossible ? this.buf.indexOf(CALL_OPEN) : -1;
    if (i >= 0) {
      // Newlines before a call are format; they come back if it turns out not to be one.
      const before = this.buf.slice(0, i);
      const text = trimTrailingNewlines(before);
      this.emit("content", text);
      this.buf = this.buf.slice(i + CALL_OPEN.length);
      this.setState({ kind: "call-open", raw: before.slice(text.length) + CALL_OPEN });
      return;
    }
    if (final) {
      this.emit("content", this.buf);
      this.buf = "";
      return;
    }
    const keep = this.callsPossible ? partialTagSuffix(this.buf, [CALL_OPEN]) : 0;
    const out = this.callsPossible ? trimTrailingNewlines(this.buf.slice(0, this.buf.length - keep)) : this.buf;
    this.emit("content", out);
    this.buf = this.buf.slice(out.length);
  }

  // Markup that is not a tool call after all: the tag is passed on as content, and what follows it is read again
  // as content (decided at the tag, whatever text has arrived after it, so any split gives the same result).
  private notACall(raw: string, why: string): void {
    log.warn(`model output: ${why}; passing ${JSON.stringify(raw.slice(0, 200))} on as content`);
    this.emit("content", raw);
    this.setState({ kind: "content", atStart: false, afterCall: false });
  }

  private callOpen(final: boolean): void {
    const st = this.state as Extract<State, { kind: "call-open" }>;
    const ws = this.buf.length - this.buf.replace(/^\s+/, "").length;
    const rest = this.buf.slice(ws);
    if (rest.length === 0) {
      if (final) this.notACall(st.raw, "an unfinished <tool_call>");
      return;
    }
    if (!rest.startsWith(FUNCTION_OPEN)) {
      if (FUNCTION_OPEN.startsWith(rest) && !final) return;
      // Not a call: the tag and what followed it are content; scanning goes on after the tag.
      this.notACall(st.raw, "<tool_call> not followed by <function=NAME>");
      return;
    }
    const end = rest.indexOf(">");
    const name = (end < 0 ? rest.slice(FUNCTION_OPEN.length) : rest.slice(FUNCTION_OPEN.length, end)).trim();
    if (/[\n<]/.test(name) || (end < 0 && final)) {
      this.notACall(st.raw, "a malformed <function=NAME>");
      return;
    }
    if (end < 0) return;
    if (!this.tools.has(name)) {
      this.notACall(st.raw, `a call to ${JSON.stringify(name)}, which is not among the request's tools`);
      return;
    }
    const call: Call = { index: this.nCalls++, id: this.newId(), name, args: {}, nParams: 0 };
    this.buf = rest.slice(end + 1);
    this.events.push({ type: "tool_call_start", index: call.index, id: call.id, name });
    this.setState({ kind: "call", call, phase: "params" });
  }

  private delta(call: Call, json: string): void {
    if (json) this.events.push({ type: "tool_call_delta", index: call.index, argumentsJson: json });
  }

  private endCall(call: Call, why?: string): void {
    if (call.param) this.endParam(call);
    if (why) log.warn(`model output: ${why} in the call to ${call.name}; closing it with the arguments read so far`);
    this.delta(call, call.nParams === 0 ? "{}" : "}");
    const done: ToolCall = { id: call.id, name: call.name, arguments: call.args };
    this.calls.push(done);
    this.events.push({ type: "tool_call_end", index: call.index, call: done });
    this.setState({ kind: "content", atStart: true, afterCall: true });
  }

  private startParam(call: Call, name: string): void {
    const schema = (this.tools.get(call.name)?.parameters?.properties as Record<string, JsonSchema> | undefined)?.[name];
    call.param = { name, streaming: isStringOnly(schema), schema, text: "", leadDone: false, started: false, sent: 0 };
  }

  private endParam(call: Call): void {
    const p = call.param!;
    call.param = undefined;
    const text = p.text.endsWith("\n") ? p.text.slice(0, -1) : p.text;
    const head = `${call.nParams === 0 ? "{" : ","}${JSON.stringify(p.name)}:`;
    if (p.name in call.args) log.warn(`model output: parameter ${p.name} given twice in the call to ${call.name}; the last one counts`);
    call.nParams++;
    if (p.streaming) {
      if (!p.started) this.delta(call, `${head}"`);
      // Everything but the format's trailing "\n" went out already.
      this.delta(call, `"`);
      call.args[p.name] = text;
      return;
    }
    const { value, ok } = coerceParameter(text, p.schema);
    if (!ok) log.warn(`model output: parameter ${p.name} of ${call.name} is ${JSON.stringify(text.slice(0, 100))}, which its schema does not allow; kept as text`);
    call.args[p.name] = value;
    this.delta(call, head + JSON.stringify(value));
  }

  private call(final: boolean): void {
    const st = this.state as Extract<State, { kind: "call" }>;
    const call = st.call;
    if (st.phase === "value") {
      const p = call.param!;
      if (!p.leadDone) {
        // The value starts after "<parameter=NAME>\n": that one newline is format.
        if (this.buf.length === 0 && !final) return;
        if (this.buf.startsWith("\n")) this.buf = this.buf.slice(1);
        p.leadDone = true;
        this.changed = true;
      }
      const ends = this.constrained ? CONSTRAINED_VALUE_ENDS : VALUE_ENDS;
      let end = -1;
      let tag = "";
      for (const t of ends) {
        const i = this.buf.indexOf(t);
        if (i >= 0 && (end < 0 || i < end)) (end = i), (tag = t);
      }
      // The constrained end tag's newline belongs to the value's text, where endParam drops it as format.
      if (tag === CONSTRAINED_VALUE_ENDS[0]) (end += 1), (tag = PARAM_CLOSE);
      const take = end >= 0 ? end : final ? this.buf.length : this.buf.length - partialTagSuffix(this.buf, ends);
      p.text += this.buf.slice(0, take);
      this.buf = this.buf.slice(take);
      if (p.streaming) {
        // Everything but a trailing "\n", which may be the format's newline before </parameter>.
        const ready = p.text.endsWith("\n") ? p.text.slice(0, -1) : p.text;
        if (ready.length > p.sent) {
          if (!p.started) this.delta(call, `${call.nParams === 0 ? "{" : ","}${JSON.stringify(p.name)}:"`);
          p.started = true;
          this.delta(call, JSON.stringify(ready.slice(p.sent)).slice(1, -1));
          p.sent = ready.length;
        }
      }
      if (end >= 0) {
        if (tag === PARAM_CLOSE) this.buf = this.buf.slice(PARAM_CLOSE.length);
        else log.warn(`model output: parameter ${p.name} of ${call.name} is missing </parameter>`);
        this.endParam(call);
        st.phase = "params";
        this.changed = true;
      } else if (final) {
        this.endCall(call, "the answer ended inside a parameter");
      }
      return;
    }
    const ws = this.buf.length - this.buf.replace(/^\s+/, "").length;
    const rest = this.buf.slice(ws);
    if (rest.length === 0) {
      if (final) this.endCall(call, st.phase === "close" ? "a missing </tool_call>" : "the answer ended inside a call");
      return;
    }
    const expected = st.phase === "params" ? [PARAM_OPEN, FUNCTION_CLOSE, CALL_CLOSE] : [CALL_CLOSE];
    if (st.phase === "params" && rest.startsWith(PARAM_OPEN)) {
      const end = rest.indexOf(">");
      if (end < 0) {
        if (final) this.endCall(call, "an unfinished <parameter=NAME>");
        return;
      }
      this.buf = rest.slice(end + 1);
      this.startParam(call, rest.slice(PARAM_OPEN.length, end).trim());
      st.phase = "value";
      this.changed = true;
      return;
    }
    if (st.phase === "params" && rest.startsWith(FUNCTION_CLOSE)) {
      this.buf = rest.slice(FUNCTION_CLOSE.length);
      st.phase = "close";
      this.changed = true;
      return;
    }
    if (rest.startsWith(CALL_CLOSE)) {
      this.buf = rest.slice(CALL_CLOSE.length);
      this.endCall(call, st.phase === "params" ? "a missing </function>" : undefined);
      return;
    }
    if (expected.some((t) => t.startsWith(rest)) && !final) return;
    // Anything else ends the call here; the text itself goes on as content (a next <tool_call> is parsed again).
    this.buf = rest;
    this.endCall(call, `unexpected ${JSON.stringify(rest.slice(0, 40))}`);
    this.setState({ kind: "content", atStart: false, afterCall: true });
  }
}
