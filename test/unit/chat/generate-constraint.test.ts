// generateChat with structured output, over a fake engine that plays the scheduler's part (fillMask before each token,
// accept after, "constraint_complete" once the value is complete) with the fixture-1024 tokenizer and template: the
// constraint reaches the engine, follows the prompt's thinking state, is released however the request ends, and the
// vocabulary is prepared only when a request needs a grammar.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { endOfTurnTokens, generateChat, type ChatModelParts } from "../../../src/chat/generate.ts";
import type { ChatEvent, Conversation, GenerationOptions } from "../../../src/chat/ir.ts";
import { ChatTemplate } from "../../../src/chat/template.ts";
import { ConstraintError, StructuredOutput, vocabularyFromTokenizer, type ConstraintRequest } from "../../../src/engine/grammar/index.ts";
import type { Engine, EngineEvent, GenerateRequest, TokenConstraint } from "../../../src/engine/types.ts";
import { native } from "../../../src/native/library.ts";
import { Tokenizer } from "../../../src/tokenizer/tokenizer.ts";
import { SCRIPTED_RUNTIME } from "../../helpers/scripted-model.ts";

const dir = join(import.meta.dir, "../../fixtures/tokenizers/fixture-1024");
let tok: Tokenizer;
let template: ChatTemplate;
beforeAll(async () => {
  tok = Tokenizer.fromJson(readFileSync(join(dir, "tokenizer.json"), "utf8"), native());
  template = ChatTemplate.fromSource(readFileSync(join(dir, "chat_template.jinja"), "utf8"), "chat_template.jinja");
});
afterAll(() => tok.free());

// Writes `answer` token by token as the engine would under the constraint: each token must be in the mask. Tags such
// as </think> and <tool_call> in the answer are their added tokens, as a model writes them.
class ConstrainedEngine implements Engine {
  constraint: TokenConstraint | undefined;
  firstMask: Uint32Array | undefined;
  ended = ""; // the done reason it gave
  constructor(private readonly answer: string) {}
  async *generate(req: GenerateRequest): AsyncIterable<EngineEvent> {
    this.constraint = req.constraint;
    yield { type: "admitted", promptTokens: req.prompt.length, cachedPromptTokens: 0 };
    const c = req.constraint;
    for (const id of tok.encodeTemplate(this.answer)) {
      await Bun.sleep(0);
      if (req.signal.aborted) return yield { type: "done", reason: (this.ended = "cancelled") };
      if (c) {
        const mask = new Uint32Array(32);
        c.fillMask(mask);
        this.firstMask ??= mask;
        if (((mask[id >>> 5]! >>> (id & 31)) & 1) === 0 || !c.accept(id)) throw new Error(`token ${id} is not allowed`);
      }
      yield { type: "tokens", tokens: [{ id }] };
      if (c?.isComplete()) return yield { type: "done", reason: (this.ended = "constraint_complete") };
    }
    yield { type: "done", reason: (this.ended = "stop") };
  }
  stats() {
    return { running: 0, queued: 0, stateBytesInUse: 0, stateBytesBudget: 0, prefixCacheHitTokens: 0, promptTokensComputed: 0, generatedTokens: 0 };
  }
  async close() {}
}

// The real grammar over the fixture vocabulary, counting constraints started and released.
let so: StructuredOutput;
beforeAll(() => {
  so = new StructuredOutput(vocabularyFromTokenizer(tok, { id: "fixture-1024", size: 1024, stopTokens: endOfTurnTokens(tok) }));
});
afterAll(() => so.close());
function structuredOutput() {
  const counts = { started: 0, released: 0 };
  return {
    counts,
    async prepare(req: ConstraintRequest) {
      const g = await so.prepare(req);
      if (!g) return g;
      const start = g.start.bind(g);
      g.start = async (o: { thinking: boolean }) => {
        const c = await start(o);
        counts.started++;
        const release = c.release.bind(c);
        c.release = () => {
          counts.released++;
          release();
        };
        return c;
      };
      return g;
    },
  };
}

function parts(engine: Engine, so?: ChatModelParts["structuredOutput"]): ChatModelParts {
  return { id: "test", tokenizer: tok, template, engine, stopTokens: endOfTurnTokens(tok), contextLength: 4096, maxOutputTokens: 1024, runtime: SCRIPTED_RUNTIME, ...(so ? { structuredOutput: so } : {}) };
}

const schema = { type: "object", properties: { a: { type: "integer" } }, required: ["a"] };
const tool = { name: "f", parameters: { type: "object", properties: { x: { type: "integer" } }, required: ["x"] } };

function conversation(over: Partial<Conversation> = {}): Conversation {
  return { messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }], tools: [], toolChoice: "auto", parallelToolCalls: false, thinking: { enabled: false }, responseFormat: { type: "json_schema", schema }, ...over };
}

const options = (stop: string[] = []): GenerationOptions => ({ stop, sampling: { temperature: 1, topP: 1, topK: 0, minP: 0, presencePenalty: 0, frequencyPenalty: 0, repetitionPenalty: 1 }, signal: new AbortController().signal });

async function collect(events: AsyncIterable<ChatEvent>): Promise<ChatEvent[]> {
  const out: ChatEvent[] = [];
  for await (const e of events) out.push(e);
  return out;
}

const text = (events: ChatEvent[]) => events.flatMap((e) => (e.type === "content" ? [e.text] : [])).join("");
const finish = (events: ChatEvent[]) => events.find((e) => e.type === "done")?.finishReason;

describe("generateChat with a grammar", () => {
  test("the constraint goes with the request; a complete value ends as stop; the constraint is released", async () => {
    const so = structuredOutput();
    const engine = new ConstrainedEngine('{"a": 42}');
    const events = await collect(generateChat(parts(engine, so), conversation(), options()));
    expect(engine.constraint).toBeDefined();
    expect(engine.ended).toBe("constraint_complete");
    expect(text(events)).toBe('{"a": 42}');
    expect(finish(events)).toBe("stop");
    expect(so.counts).toEqual({ started: 1, released: 1 });
  });

  test("forced tool calls finish as tool_calls, parsed as calls", async () => {
    const so = structuredOutput();
    const engine = new ConstrainedEngine("<tool_call>\n<function=f>\n<parameter=x>\n7\n</parameter>\n</function>\n</tool_call>");
    const events = await collect(generateChat(parts(engine, so), conversation({ tools: [tool], toolChoice: "required", responseFormat: { type: "text" } }), options()));
    expect(events.flatMap((e) => (e.type === "tool_call_end" ? [e.call.arguments] : []))).toEqual([{ x: 7 }]);
    expect(finish(events)).toBe("tool_calls");
    expect(so.counts.released).toBe(1);
  });

  test("released when a stop string ends the answer, and when the consumer stops reading", async () => {
    const so = structuredOutput();
    await collect(generateChat(parts(new ConstrainedEngine('{"a": 12345}'), so), conversation(), options(["3"])));
    for await (const e of generateChat(parts(new ConstrainedEngine('{"a": 12345}'), so), conversation(), options())) if (e.type === "content") break;
    expect(so.counts).toMatchObject({ started: 2, released: 2 });
  });

  test("with the prompt inside <think>, reasoning is free and the grammar applies after </think>", async () => {
    const so = structuredOutput();
    const engine = new ConstrainedEngine('x</think>\n\n{"a": 1}');
    const events = await collect(generateChat(parts(engine, so), conversation({ thinking: { enabled: true } }), options()));
    // The first mask is the reasoning's: "x" is allowed (a JSON answer could not start with it), a stop token is not.
    const allowed = (id: number) => (engine.firstMask![id >>> 5]! >>> (id & 31)) & 1;
    expect(allowed(tok.encode("x")[0]!)).toBe(1);
    expect(allowed(tok.addedTokenId("<|im_end|>")!)).toBe(0);
    expect(events.flatMap((e) => (e.type === "reasoning" ? [e.text] : [])).join("")).toBe("x");
    expect(text(events)).toBe('{"a": 1}');
    expect(finish(events)).toBe("stop");
    expect(events.find((e) => e.type === "done")).toMatchObject({ usage: { reasoningTokens: 2 } });
    expect(engine.ended).toBe("constraint_complete");
  });

  test("requests without a grammar start no constraint; a model without structured output refuses one", async () => {
    const so = structuredOutput();
    const events = await collect(generateChat(parts(new ConstrainedEngine("hello"), so), conversation({ responseFormat: { type: "text" } }), options()));
    expect(text(events)).toBe("hello");
    expect(so.counts.started).toBe(0);
    const refused = collect(generateChat(parts(new ConstrainedEngine("{}")), conversation(), options()));
    expect(refused).rejects.toBeInstanceOf(ConstraintError);
  });
});
