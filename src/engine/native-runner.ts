// The StepModel / StepRunner seam (runner.ts) over libsplash's typed wrappers (src/native/model.ts): how an Engine
// is built on a loaded native model.
//
//   const model = await Model.load(dir, { quant: "q8", maxStepTokens: 512 });
//   const engine = createEngine(nativeStepModel(model), { kvBudget, cacheSalt: `${id}:q8` });
//   …
//   await engine.close(); // frees the cache
//   model.free();
import { StepRefusals } from "../native/errors.ts";
import type { Cache, Model } from "../native/model.ts";
import type { CacheGeometry, SampledToken, StepInput, StepModel, StepRunner } from "./runner.ts";

export function nativeStepModel(model: Model): StepModel {
  const info = model.info;
  return {
    vocabSize: info.vocabSize,
    contextTokens: info.maxPositionEmbeddings,
    maxStepTokens: info.maxStepTokens,
    fixedBytes: info.weightBytes + info.scratchBytes,
    pageBytes: (pageTokens) => model.pageBytes(pageTokens),
    slotBytes: model.slotBytes,
    stepClock: info.backend === "cpu" ? "cpu" : "wall",
    ...(model.drafter ? { drafter: { kind: model.drafter.kind, maxDraft: model.drafter.maxDraft, maxSeqs: model.drafter.maxSeqs } } : {}),
    createRunner: (geometry: CacheGeometry) => new NativeRunner(model.createCache(geometry), model.pageBytes(geometry.pageTokens), model.slotBytes),
  };
}

class NativeRunner implements StepRunner {
  constructor(
    private readonly cache: Cache,
    private readonly pageBytes: number,
    private readonly slotBytes: number,
  ) {}

  // One native call on the model's call thread (the JavaScript thread serves requests meanwhile). Sequences
  // libsplash refused alone come back as their errors.
  async step(seqs: readonly StepInput[]): Promise<(SampledToken | Error | null)[]> {
    try {
      return await this.cache.stepAsync(seqs);
    } catch (e) {
      if (e instanceof StepRefusals) return e.results;
      throw e;
    }
  }

  copySlot(src: number, dst: number): void {
    this.cache.copySlot(src, dst);
  }

  clearSlot(slot: number): void {
    this.cache.clearSlot(slot);
  }

  readPage(page: number): Uint8Array {
    const out = new Uint8Array(this.pageBytes);
    this.cache.readPage(page, out);
    return out;
  }

  writePage(page: number, data: Uint8Array): void {
    this.cache.writePage(page, data);
  }

  readSlot(slot: number): Uint8Array {
    const out = new Uint8Array(this.slotBytes);
    this.cache.readSlot(slot, out);
    return out;
  }

  writeSlot(slot: number, data: Uint8Array): void {
    this.cache.writeSlot(slot, data);
  }

  close(): void {
    this.cache.free();
  }
}
