// The token-mask engine: xgrammar's WebAssembly build (@mlc-ai/web-xgrammar 0.1.27, pinned) compiles our EBNF
// against the vocabulary and answers, per sequence, which tokens may come next. It runs in grammar workers
// (grammar-worker.ts, grammar-pool.ts), never on the engine thread.
//
// Why xgrammar, and why only its EBNF entry point. Its per-token mask costs a small fraction of a decode step, its
// vocabulary preparation is paid once per model and its compile once per schema (cached after): `splash bench grammar`
// measures all three (BENCHMARKS.md "Grammar").
// - The per-token mask is fast because xgrammar precomputes, per grammar position, the tokens decided without
//   context; building that engine again in TS would cost far more than it saves. It runs under Bun and inside
//   `bun build --compile` binaries: the WASM is inlined as base64, so it loads offline with nothing beside the binary.
// - Its own JSON-Schema converter is not used: it accepts unknown keywords and formats silently (unconstrained
//   output), treats oneOf as anyOf, turns allOf of two schemas into "any", lets number bounds like maximum 1.5
//   through as garbage ("1\u00005"), and puts unescaped quotes and control characters into pattern strings. Every
//   error it meets aborts the WASM call. schema.ts validates and json-grammar.ts writes EBNF instead.
// - Its EBNF has traps the writers avoid: character-class members above U+007F match single bytes (ebnf.ts charSet),
//   a star over alternatives makes masks slow enough to stall a step (ebnf.ts starOf), and bounded repetitions cost
//   compile time per position over the whole vocabulary, also past 128 where it repeats natively (it still writes out
//   128 positions on each side): regex.ts caps them, and string lengths and item counts are counted beside the grammar
//   instead (bounds.ts).
// - The package only offers an async getNextTokenBitmask() (it awaits its lazy init on every call). The worker
//   answers the engine's synchronous calls, so the binding's WebAssembly memory is captured when the module instantiates and
//   the mask vector is copied straight out of it; a self-check at start compares that copy with the package's own
//   async path, so a package update that changes the layout fails loudly instead of masking wrongly.
import * as xg from "@mlc-ai/web-xgrammar";
import type { Vocabulary } from "./vocab.ts";

// The embind objects behind the package's wrappers (fields the package keeps private).
type EmbindVector = { $$: { ptr: number }; size(): number; delete(): void };
type EmbindMatcher = {
  AcceptToken(token: number, verbose: boolean): boolean;
  GetNextTokenBitmask(vocabSize: number): EmbindVector;
  Rollback(n: number): void;
  delete(): void;
};

let memory: Promise<WebAssembly.Memory> | undefined;

// Instantiates the module once, keeping a reference to its linear memory.
function loadModule(): Promise<WebAssembly.Memory> {
  memory ??= (async () => {
    let found: WebAssembly.Memory | undefined;
    const original = WebAssembly.instantiate;
    const capture = async (...args: unknown[]) => {
      const result = await (original as (...a: unknown[]) => Promise<WebAssembly.WebAssemblyInstantiatedSource | WebAssembly.Instance>)(...args);
      const instance = "instance" in result ? result.instance : result;
      for (const v of Object.values(instance.exports)) if (v instanceof WebAssembly.Memory) found = v;
      return result;
    };
    Reflect.set(WebAssembly, "instantiate", capture);
    try {
      (await xg.TokenizerInfo.createTokenizerInfo([])).dispose();
    } finally {
      Reflect.set(WebAssembly, "instantiate", original);
    }
    if (!found) throw new Error("web-xgrammar: could not find the WebAssembly memory (was the module loaded before?)");
    return found;
  })();
  return memory;
}

export class XgrammarVocab {
  private constructor(
    readonly vocab: Vocabulary,
    private readonly memory: WebAssembly.Memory,
    private readonly compiler: xg.GrammarCompiler,
  ) {}

  // Preprocesses the vocabulary (once per model). Special tokens and padding are passed as empty strings,
  // which xgrammar never generates; stop tokens are allowed when the grammar can end.
  static async create(vocab: Vocabulary): Promise<XgrammarVocab> {
    const mem = await loadModule();
    const encoded = vocab.tokens.map((t, id) => (vocab.special.has(id) ? "" : t));
    const info = await xg.TokenizerInfo.createTokenizerInfo(encoded, "byte_level", false, vocab.size, vocab.stopTokens);
    const compiler = await xg.GrammarCompiler.createGrammarCompiler(info, false);
    const v = new XgrammarVocab(vocab, mem, compiler);
    await v.selfCheck();
    return v;
  }

  async compile(ebnf: string): Promise<xg.CompiledGrammar> {
    const grammar = await xg.Grammar.fromEBNF(ebnf);
    try {
      return await this.compiler.compileGrammar(grammar);
    } finally {
      grammar.dispose();
    }
  }

  async matcher(compiled: xg.CompiledGrammar): Promise<Matcher> {
    const m = await xg.GrammarMatcher.createGrammarMatcher(compiled);
    return new Matcher((m as unknown as { handle: EmbindMatcher }).handle, this.vocab.size, this.memory);
  }

  private async selfCheck(): Promise<void> {
    const compiled = await this.compile('root ::= "{" [a-z]* "}"');
    const official = await xg.GrammarMatcher.createGrammarMatcher(compiled);
    const ours = await this.matcher(compiled);
    try {
      const expected = new Uint32Array((await official.getNextTokenBitmask()).buffer);
      const got = new Uint32Array(Math.ceil(this.vocab.size / 32));
      ours.fillMask(got);
      if (expected.length !== got.length || expected.some((w, i) => w !== got[i])) {
        throw new Error("web-xgrammar: the synchronous mask copy disagrees with getNextTokenBitmask(); the package internals changed");
      }
    } finally {
      official.dispose();
      ours.dispose();
      compiled.dispose();
    }
  }
}

// One sequence's position in a compiled grammar. All calls are synchronous.
export class Matcher {
  private readonly words: number;

  constructor(
    private readonly handle: EmbindMatcher,
    private readonly vocabSize: number,
    private readonly memory: WebAssembly.Memory,
  ) {
    this.words = Math.ceil(vocabSize / 32);
  }

  accept(token: number): boolean {
    return this.handle.AcceptToken(token, false);
  }

  rollback(n: number): void {
    this.handle.Rollback(n);
  }

  // Copies the next-token bitmask (bit t of word t >> 5 = token t allowed) out of the module's memory.
  fillMask(out: Uint32Array): void {
    const vec = this.handle.GetNextTokenBitmask(this.vocabSize);
    try {
      const heap = new Uint32Array(this.memory.buffer);
      const begin = heap[vec.$$.ptr >>> 2]!;
      const end = heap[(vec.$$.ptr >>> 2) + 1]!;
      if ((end - begin) >>> 2 !== this.words || out.length < this.words) throw new Error("xgrammar mask has an unexpected size");
      out.set(heap.subarray(begin >>> 2, end >>> 2));
    } finally {
      vec.delete();
    }
  }

  dispose(): void {
    this.handle.delete();
  }
}
