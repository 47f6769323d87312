// Structured output: a conversation's response format and tool choice → a TokenConstraint per sequence.
//
//   const so = new LazyStructuredOutput(() => vocabulary);          // once per loaded model (src/models/load.ts)
//   const grammar = await so.prepare(conversation);                  // per request; ConstraintError → HTTP 400
//   const constraint = grammar && (await grammar.start({ thinking: promptEndsInsideThink }));
//   engine.generate({ ..., constraint });                            // the engine calls fillMask/accept/…
//   constraint?.release();                                           // once the engine request has ended
//
// Grammars are compiled once per (vocabulary, grammar text) and cached; the grammar text is the canonical form of
// the schema and tools (schema.ts + json-grammar.ts + tool-grammar.ts write it deterministically).
import type { TokenConstraint } from "../types.ts";
import { Bounds, BoundsTable, type BoundsPlan } from "./bounds.ts";
import { GrammarConstraint, ThinkingConstraint, type MaskPolicy } from "./constraint.ts";
import { ThinkText } from "./think-text.ts";
import { grammarKind, planGrammar, type ConstraintRequest, type GrammarKind, type GrammarPlan } from "./request.ts";
import { Utf8Table } from "./utf8.ts";
import type { Vocabulary } from "./vocab.ts";
import { XgrammarVocab } from "./xgrammar.ts";
import type { CompiledGrammar } from "@mlc-ai/web-xgrammar";

export { checkDraft } from "./constraint.ts";
export { ConstraintError, grammarKind, planGrammar, type ConstraintRequest, type GrammarKind } from "./request.ts";
export { decodeTokens, tokenBytes, vocabularyFromTokenizer, type Vocabulary } from "./vocab.ts";

const CACHE_ENTRIES = 64;
// Added tokens a grammar may produce as text; every other added token is blocked (see MaskPolicy.blocked).
const TOOL_TAGS = ["<tool_call>", "</tool_call>"];

export type SequenceConstraint = TokenConstraint & { release(): void };

export class StructuredOutput {
  private readonly cache = new Map<string, Promise<CompiledGrammar>>();
  private readonly plans = new Map<string, GrammarPlan | null>();
  private thinkText: ThinkText | undefined;
  private boundsTable: BoundsTable | undefined;

  private constructor(
    private readonly xg: XgrammarVocab,
    private readonly utf8: Utf8Table,
  ) {}

  // Loads the WebAssembly module (once per process) and preprocesses the vocabulary (≈1 s for 151K tokens).
  static async create(vocab: Vocabulary): Promise<StructuredOutput> {
    return new StructuredOutput(await XgrammarVocab.create(vocab), new Utf8Table(vocab));
  }

  get vocabulary(): Vocabulary {
    return this.xg.vocab;
  }

  // The grammar a request needs (compiled, or from the cache), or null when it needs none. Throws ConstraintError
  // for a schema or tool choice the grammar cannot enforce.
  async prepare(req: ConstraintRequest): Promise<PreparedGrammar | null> {
    // Writing the grammar takes milliseconds; a request seen before skips that too.
    const requestKey = JSON.stringify([req.responseFormat, req.tools, req.toolChoice, req.parallelToolCalls]);
    let plan = this.plans.get(requestKey);
    if (plan === undefined) {
      plan = planGrammar(req);
      this.plans.set(requestKey, plan);
      if (this.plans.size > CACHE_ENTRIES) this.plans.delete(this.plans.keys().next().value!);
    }
    if (!plan) return null;
    // Requests that differ only in their counts share the compiled grammar.
    const key = `${this.xg.vocab.id}\n${plan.ebnf}`;
    let entry = this.cache.get(key);
    if (entry) this.cache.delete(key);
    else {
      entry = this.xg.compile(plan.ebnf);
      entry.catch(() => this.cache.delete(key));
    }
    this.cache.set(key, entry);
    while (this.cache.size > CACHE_ENTRIES) {
      const [oldest, evicted] = this.cache.entries().next().value!;
      this.cache.delete(oldest);
      // Matchers made from it keep what they need (xgrammar shares it with them).
      evicted.then((g) => g.dispose(), () => {});
    }
    const bounds = plan.bounds && { plan: plan.bounds, table: (this.boundsTable ??= new BoundsTable(this.utf8.bytes)) };
    return new PreparedGrammar(this.xg, await entry, plan.kind, plan.ebnf, this.policy(plan.kind), bounds);
  }

  private policy(kind: GrammarKind): MaskPolicy {
    const v = this.xg.vocab;
    const allowed = new Set(kind === "json" ? [] : TOOL_TAGS);
    const blocked = [...v.added].filter(([text, id]) => !v.special.has(id) && !allowed.has(text)).map(([, id]) => id);
    const thinkText = () => {
      const end = v.added.get("</think>");
      if (end === undefined) throw new Error("thinking constraint: the vocabulary has no </think> token");
      return (this.thinkText ??= new ThinkText(v, end));
    };
    return { size: v.size, stopTokens: v.stopTokens, blocked, utf8: this.utf8, thinkText };
  }
}

// The StructuredOutput of one loaded model, made on the first request that needs a grammar: preparing the vocabulary
// takes seconds for a 150K vocabulary (and blocks the event loop meanwhile), so a model that never gets such a request
// never pays, and requests without one never wait for it.
export class LazyStructuredOutput {
  private so: Promise<StructuredOutput> | undefined;

  constructor(private readonly vocabulary: () => Vocabulary) {}

  async prepare(req: ConstraintRequest): Promise<PreparedGrammar | null> {
    if (!grammarKind(req)) return null;
    if (!this.so) {
      this.so = StructuredOutput.create(this.vocabulary());
      this.so.catch(() => (this.so = undefined)); // a failed preparation is tried again by the next request
    }
    return (await this.so).prepare(req);
  }
}

export class PreparedGrammar {
  constructor(
    private readonly xg: XgrammarVocab,
    readonly compiled: CompiledGrammar, // shared by every request with the same grammar text
    readonly kind: GrammarKind,
    readonly ebnf: string,
    private readonly policy: MaskPolicy,
    private readonly bounds: { plan: BoundsPlan; table: BoundsTable } | null,
  ) {}

  // A fresh constraint for one sequence. With `thinking` (the prompt ends inside <think>), the reasoning up to the
  // </think> token is free (constraint.ts ThinkingConstraint) and the grammar applies after it.
  async start(options: { thinking: boolean }): Promise<SequenceConstraint> {
    const text = options.thinking ? this.policy.thinkText() : undefined;
    const bounds = this.bounds && new Bounds(this.bounds.plan, this.bounds.table);
    const inner = new GrammarConstraint(await this.xg.matcher(this.compiled), this.policy, bounds);
    return text ? new ThinkingConstraint(inner, this.xg.vocab.added.get("</think>")!, this.policy, text) : inner;
  }
}
