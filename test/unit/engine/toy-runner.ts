// A toy model for the engine tests: no weights, but state that behaves like the real thing. Each position writes a
// value (from its token and position) into its KV page; each slot keeps a running hash of every token it has seen
// (the GDN state); the next token is a function of the slot's hash and of every KV value the page table reaches. So
// a wrong page table, a page overwritten while shared, a badly restored snapshot or a skipped token changes the
// output, exactly as it would with a model. It also checks the step contract: page tables cover the positions, no
// page is written by two sequences of a step, and shared (read-only) pages are never written.
import type { CacheGeometry, SampledToken, StepClock, StepModel, StepInput, StepRunner } from "../../../src/engine/runner.ts";

export type ToyOptions = {
  vocabSize?: number;
  contextTokens?: number;
  maxStepTokens?: number;
  kvBytesPerToken?: number;
  slotBytes?: number;
  stepDelayMs?: number; // each step waits this long (lets aborts land mid-generation)
  stepClock?: StepClock; // default "cpu"
};

const mix = (a: number, b: number): number => (Math.imul(a ^ b, 0x9e3779b1) ^ ((a >>> 15) + b)) >>> 0;

export class ToyRunner implements StepRunner {
  readonly kv: Int32Array[];
  readonly slots: Uint32Array;
  readonly steps: { tokens: number; seqs: number }[] = [];
  readOnly: ((page: number) => boolean) | undefined; // pages that must not be written (shared), set by a test
  closed = false;

  constructor(
    readonly geometry: CacheGeometry,
    readonly vocabSize: number,
    readonly stepDelayMs: number,
  ) {
    this.kv = Array.from({ length: geometry.nPages }, () => new Int32Array(geometry.pageTokens).fill(-1));
    this.slots = new Uint32Array(geometry.nSlots).fill(0xdeadbeef);
  }

  async step(seqs: readonly StepInput[]): Promise<(SampledToken | null)[]> {
    if (this.stepDelayMs > 0) await Bun.sleep(this.stepDelayMs);
    const B = this.geometry.pageTokens;
    const writtenBy = new Map<number, number>();
    this.steps.push({ tokens: seqs.reduce((n, s) => n + s.tokens.length, 0), seqs: seqs.length });
    return seqs.map((s, i) => {
      const end = s.nPast + s.tokens.length;
      const ahead = end + (s.speculate?.next ?? 0); // a drafter writes ahead
      if (s.pages.length !== Math.ceil(ahead / B)) throw new Error(`toy: ${s.pages.length} pages for ${ahead} positions`);
      let state = this.slots[s.slot]!;
      for (let k = 0; k < s.tokens.length; k++) {
        const pos = s.nPast + k;
        const page = s.pages[Math.floor(pos / B)]!;
        const other = writtenBy.get(page);
        if (other !== undefined && other !== i) throw new Error(`toy: page ${page} written by two sequences in one step`);
        writtenBy.set(page, i);
        if (this.readOnly?.(page)) throw new Error(`toy: shared page ${page} written at position ${pos}`);
        this.kv[page]![pos % B] = mix(s.tokens[k]!, pos);
        state = mix(state, s.tokens[k]!);
      }
      this.slots[s.slot] = state;
      if (!s.sample) return null;
      const { sampling, topLogprobs = 0 } = s.sample;
      const allowed = s.speculate?.verify ? s.speculate.verify.allowed : s.sample.allowed;
      let acc = 0;
      for (let pos = 0; pos < end; pos++) {
        const v = this.kv[s.pages[Math.floor(pos / B)]!]![pos % B]!;
        if (v === -1) throw new Error(`toy: position ${pos} was never written`);
        acc = mix(acc, v);
      }
      let token = mix(state, acc) % this.vocabSize;
      if (sampling.temperature > 0) token = mix(token, mix(sampling.seed, end)) % this.vocabSize;
      if (allowed) {
        while (((allowed[token >>> 5]! >>> (token & 31)) & 1) === 0) token = (token + 1) % this.vocabSize;
      }
      const top = topLogprobs > 0 ? Array.from({ length: topLogprobs }, (_, j) => ({ id: (token + j) % this.vocabSize, logprob: -j })) : null;
      return { token, logprob: -0.5, top };
    });
  }

  copySlot(src: number, dst: number): void {
    this.slots[dst] = this.slots[src]!;
  }

  clearSlot(slot: number): void {
    this.slots[slot] = 0;
  }

  // Host copies: a page is its positions' values (4 bytes each), a slot its hash (4 bytes).
  readPage(page: number): Uint8Array {
    return new Uint8Array(this.kv[page]!.slice().buffer);
  }

  writePage(page: number, data: Uint8Array): void {
    if (this.readOnly?.(page)) throw new Error(`toy: shared page ${page} written from a host copy`);
    this.kv[page]!.set(new Int32Array(data.slice().buffer));
  }

  readSlot(slot: number): Uint8Array {
    return new Uint8Array(Uint32Array.of(this.slots[slot]!).buffer);
  }

  writeSlot(slot: number, data: Uint8Array): void {
    this.slots[slot] = new Uint32Array(data.slice().buffer)[0]!;
  }

  close(): void {
    this.closed = true;
  }
}

export class ToyModel implements StepModel {
  readonly vocabSize: number;
  readonly contextTokens: number;
  readonly maxStepTokens: number;
  readonly fixedBytes = 1000;
  readonly slotBytes: number;
  readonly stepClock: StepClock;
  private readonly kvBytesPerToken: number;
  runner: ToyRunner | undefined;

  constructor(private readonly options: ToyOptions = {}) {
    this.vocabSize = options.vocabSize ?? 97;
    this.contextTokens = options.contextTokens ?? 4096;
    this.maxStepTokens = options.maxStepTokens ?? 256;
    this.kvBytesPerToken = options.kvBytesPerToken ?? 100;
    this.slotBytes = options.slotBytes ?? 1600;
    this.stepClock = options.stepClock ?? "cpu";
  }

  pageBytes(pageTokens: number): number {
    return pageTokens * this.kvBytesPerToken;
  }

  createRunner(cache: CacheGeometry): ToyRunner {
    this.runner = new ToyRunner(cache, this.vocabSize, this.options.stepDelayMs ?? 0);
    return this.runner;
  }
}

// A prompt of `n` tokens from a seed (deterministic).
export function toyPrompt(n: number, seed: number, vocab = 97): Int32Array {
  const p = new Int32Array(n);
  let s = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    s = mix(s, i);
    p[i] = 1 + (s % (vocab - 1));
  }
  return p;
}
