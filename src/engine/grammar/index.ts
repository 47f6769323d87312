// Structured output: a conversation's response format and tool choice → a TokenConstraint per sequence.
//
//   const so = new StructuredOutput(vocabulary);                     // once per loaded model (src/models/load.ts)
//   const grammar = await so.prepare(conversation);                  // per request; ConstraintError → HTTP 400
//   const constraint = grammar && (await grammar.start({ thinking: promptEndsInsideThink }));
//   engine.generate({ ..., constraint });                            // the engine calls fillMask/accept/…
//   constraint?.release();                                           // once the engine request has ended
//   so.close();                                                      // with the model (ends the grammar workers)
//
// Grammars are compiled once per (vocabulary, grammar text), in a worker thread (grammar-pool.ts), and cached; the
// grammar text is the canonical form of the schema and tools (schema.ts + json-grammar.ts + tool-grammar.ts write it
// deterministically).
import type { TokenConstraint } from "../types.ts";
import { Bounds, type BoundsPlan, type BoundsTable } from "./bounds.ts";
import { GrammarConstraint, ThinkingConstraint, type MaskPolicy } from "./constraint.ts";
import { grammarKind, planGrammar, type ConstraintRequest, type GrammarKind, type GrammarPlan } from "./request.ts";
import { readTables, tablesPath, useTables, type VocabTables } from "./vocab-tables.ts";
import type { Vocabulary } from "./vocab.ts";
import { GrammarPool, type RemoteGrammar } from "./grammar-pool.ts";

export { checkDraft } from "./constraint.ts";
export { ConstraintError, grammarKind, planGrammar, type ConstraintRequest, type GrammarKind } from "./request.ts";
export { decodeTokens, tokenBytes, vocabularyFromTokenizer, type Vocabulary } from "./vocab.ts";

const CACHE_ENTRIES = 64;
// Added tokens a grammar may produce as text; every other added token is blocked (see MaskPolicy.blocked).
const TOOL_TAGS = ["<tool_call>", "</tool_call>"];

export type SequenceConstraint = TokenConstraint & { release(): void };

export class StructuredOutput {
  private readonly cache = new Map<string, Promise<RemoteGrammar>>();
  private readonly plans = new Map<string, GrammarPlan | null>();
  private readonly pool: GrammarPool;
  private readonly tables: Promise<VocabTables>;

  // Starts the first grammar worker, which prepares the vocabulary for xgrammar in the background (a pass over every
  // token), and builds the vocabulary's tables there unless they are on disk already (vocab-tables.ts); a request
  // that needs a grammar before then waits for them, no other request does.
  constructor(readonly vocabulary: Vocabulary) {
    this.pool = new GrammarPool(vocabulary);
    const path = tablesPath(vocabulary);
    const kept = readTables(path, vocabulary);
    this.tables = kept ? Promise.resolve(useTables(kept)) : this.pool.tables(path).then(useTables);
    this.tables.catch(() => {}); // reported by the requests that wait for them
  }

  // A StructuredOutput whose first worker and tables are ready.
  static async create(vocab: Vocabulary): Promise<StructuredOutput> {
    const so = new StructuredOutput(vocab);
    await Promise.all([so.pool.ready(), so.tables]);
    return so;
  }

  close(): void {
    this.pool.close();
  }

  // The grammar a request needs (compiled, or from the cache), or null when it needs none. Throws ConstraintError
  // for a schema or tool choice the grammar cannot enforce.
  async prepare(req: ConstraintRequest): Promise<PreparedGrammar | null> {
    if (!grammarKind(req)) return null;
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
    const key = `${this.vocabulary.id}\n${plan.ebnf}`;
    let entry = this.cache.get(key);
    if (entry) this.cache.delete(key);
    else {
      entry = this.pool.compile(plan.ebnf);
      entry.catch(() => this.cache.delete(key));
    }
    this.cache.set(key, entry);
    while (this.cache.size > CACHE_ENTRIES) {
      const [oldest, evicted] = this.cache.entries().next().value!;
      this.cache.delete(oldest);
      // Matchers made from it keep what they need (xgrammar shares it with them).
      evicted.then((g) => g.dispose(), () => {});
    }
    const tables = await this.tables;
    const bounds = plan.bounds && { plan: plan.bounds, table: tables.bounds };
    return new PreparedGrammar(await entry, plan.kind, plan.ebnf, this.policy(plan.kind, tables), bounds);
  }

  private policy(kind: GrammarKind, tables: VocabTables): MaskPolicy {
    const v = this.vocabulary;
    const allowed = new Set(kind === "json" ? [] : TOOL_TAGS);
    const blocked = [...v.added].filter(([text, id]) => !v.special.has(id) && !allowed.has(text)).map(([, id]) => id);
    const thinkText = () => {
      if (!tables.think) throw new Error("thinking constraint: the vocabulary has no </think> token");
      return tables.think;
    };
    return { size: v.size, stopTokens: v.stopTokens, blocked, utf8: tables.utf8, thinkText };
  }
}

export class PreparedGrammar {
  constructor(
    readonly compiled: RemoteGrammar, // shared by every request with the same grammar text
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
    const inner = new GrammarConstraint(await this.compiled.matcher(), this.policy, bounds);
    return text ? new ThinkingConstraint(inner, text.end, this.policy, text) : inner;
  }
}
