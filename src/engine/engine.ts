// The Engine of one loaded model: one async loop that, at each step boundary, releases cancelled requests, admits
// waiting ones, builds a step (scheduler.ts), runs it (the StepRunner) and applies its results. Requests join and
// leave only at step boundaries, so the native step never sees a sequence change under it.
//
// The step computes on another thread (src/native/call-thread.ts) while this one serves requests: the loop starts
// the next step as soon as it has applied the last one's results, and the streams write the tokens those results
// handed them while it runs.
import { join } from "node:path";
import { machine } from "../machine.ts";
import { formatBytes } from "../format.ts";
import { log } from "../log.ts";
import { rootHash } from "./block-hash.ts";
import { BlockPool } from "./block-pool.ts";
import { KVCacheManager, type LoadedState } from "./cache-manager.ts";
import { DiskPrefixCache } from "./disk-cache.ts";
import { EventStream } from "./event-stream.ts";
import { describeMemoryPlan, planMemory, type MemoryPlan } from "./memory-plan.ts";
import type { StepClock, StepModel, StepRunner } from "./runner.ts";
import { Scheduler } from "./scheduler.ts";
import { Sequence } from "./sequence.ts";
import { StepTimer } from "./step-timer.ts";
import { ACCEPTANCE_BUCKETS, EngineOverloaded, PromptTooLong, type Engine, type EngineEvent, type EngineStats, type GenerateRequest, type SpeculationCounts } from "./types.ts";

export type EngineOptions = {
  kvBudget?: number; // bytes of sequence state; default: derived from the machine (memory-plan.ts)
  pageTokens?: number; // tokens per KV page and prefix-cache block (default 64)
  maxSeqs?: number; // sequences running at once (default 16)
  maxQueue?: number; // requests waiting before EngineOverloaded (default 256)
  maxStepTokens?: number; // tokens per step (default and most: the model's, which its load sized the scratch for)
  stallTargetMs?: number; // how long a step may take when it carries a prompt next to decoding streams (default 200)
  draftLength?: number; // drafts per cycle, fixed (benchmarks); default: adaptive (speculation.ts)
  snapshotInterval?: number; // tokens between GDN snapshots in long prompts (default 4096)
  prefixCache?: boolean; // default true
  cacheSalt?: string; // names the model in prefix-cache hashes (model id, weights, quantization)
  // The prefix cache's disk tier: `budget` bytes of files in dir/<root hash> (the salt names the directory).
  diskCache?: { dir: string; budget: number };
};

const DEFAULTS = { pageTokens: 64, maxSeqs: 16, maxQueue: 256, snapshotInterval: 4096, stallTargetMs: 200 };

// Plans the model's sequence-state memory, creates its cache and starts its loop. The engine owns the runner (and
// closes it); the model stays the caller's.
export function createEngine(model: StepModel, options: EngineOptions = {}): SplashEngine {
  const pageTokens = options.pageTokens ?? DEFAULTS.pageTokens;
  const plan = planMemory(model, { kvBudget: options.kvBudget, pageTokens, maxSeqs: options.maxSeqs ?? DEFAULTS.maxSeqs }, machine());
  log.info(describeMemoryPlan(plan));
  const runner = model.createRunner({ pageTokens, nPages: plan.nPages, nSlots: plan.nSlots });
  return new SplashEngine(model, runner, plan, options);
}

// A step's cost as the speculation policy weighs it (StepModel.stepClock): starts a measurement, whose result is the
// milliseconds since. "cpu": the CPU time of the threads that compute the steps, the process's less this thread's
// (it serves requests meanwhile); "wall": the time between the call and its result.
export function stepMeter(clock: StepClock): () => number {
  if (clock === "wall") {
    const t0 = performance.now();
    return () => performance.now() - t0;
  }
  const p0 = process.cpuUsage();
  const t0 = process.threadCpuUsage();
  return () => {
    const p = process.cpuUsage(p0);
    const t = process.threadCpuUsage(t0);
    return (p.user + p.system - t.user - t.system) / 1000;
  };
}

// Resolves on the event loop's next turn.
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

export class SplashEngine implements Engine {
  readonly scheduler: Scheduler;
  readonly cache: KVCacheManager;
  // The longest prompt + output one request can have: the model's context, or the budget's pages if fewer.
  readonly contextTokens: number;
  private nextId = 0;
  private closed = false;
  private wakeLoop: (() => void) | undefined;
  private readonly loopDone: Promise<void>;
  private serviceSeconds = 0; // moving average of admission-to-finish time, for Retry-After
  private readonly timer: StepTimer;
  private readonly stallTargetMs: number;
  // disk reads of admitted sequences: in flight, and done (applied at the next step boundary)
  private readonly fetching = new Set<Sequence>();
  private readonly fetched: { seq: Sequence; data: LoadedState | undefined }[] = [];
  private readonly disk: DiskPrefixCache | undefined;
  private readonly speculation: SpeculationCounts & { requestAcceptance: number[]; requestAcceptanceSum: number } = {
    cycles: 0,
    drafted: 0,
    accepted: 0,
    requestAcceptance: ACCEPTANCE_BUCKETS.map(() => 0).concat(0),
    requestAcceptanceSum: 0,
  };

  constructor(
    private readonly model: StepModel,
    private readonly runner: StepRunner,
    readonly plan: MemoryPlan,
    options: EngineOptions = {},
  ) {
    const pool = new BlockPool(plan.nPages, plan.nSlots);
    const prefixCache = options.prefixCache ?? true;
    const root = rootHash(options.cacheSalt ?? "");
    const d = options.diskCache;
    this.disk = prefixCache && d && d.budget > 0 ? new DiskPrefixCache({ dir: join(d.dir, root), budget: d.budget, entryBytes: { page: plan.pageBytes, state: plan.slotBytes } }) : undefined;
    if (this.disk) {
      const t = this.disk.stats();
      log.info(`prefix cache on disk: ${formatBytes(t.bytes)} in ${t.files} entries of ${formatBytes(t.budget)} in ${this.disk.options.dir}`);
    }
    this.cache = new KVCacheManager(pool, runner, {
      pageTokens: plan.pageTokens,
      pageBytes: plan.pageBytes,
      slotBytes: plan.slotBytes,
      root,
      prefixCache,
      ...(this.disk ? { disk: { tier: this.disk, copies: runner } } : {}),
      // Snapshot points are block boundaries: the interval is rounded to whole blocks.
      snapshotInterval: Math.max(1, Math.round((options.snapshotInterval ?? DEFAULTS.snapshotInterval) / plan.pageTokens)) * plan.pageTokens,
    });
    // A step holds a decode token per running sequence plus at least one block of prompt, so the step size can
    // lower the number of sequences that run at once.
    const maxStepTokens = Math.min(model.maxStepTokens, options.maxStepTokens ?? model.maxStepTokens);
    const maxRunning = Math.min(plan.maxSeqs, maxStepTokens - plan.pageTokens);
    if (maxRunning < 1) throw new Error(`a step of ${maxStepTokens} tokens cannot hold a block of ${plan.pageTokens} tokens and a decode token`);
    this.scheduler = new Scheduler(this.cache, {
      maxStepTokens,
      maxRunning,
      maxQueue: options.maxQueue ?? DEFAULTS.maxQueue,
      vocabSize: model.vocabSize,
      ...(model.drafter ? { drafter: model.drafter } : {}),
      ...(options.draftLength !== undefined ? { draftLength: options.draftLength } : {}),
    });
    this.scheduler.onFinish = (seq) => {
      if (seq.admittedAt > 0) this.serviceSeconds = 0.8 * this.serviceSeconds + 0.2 * ((performance.now() - seq.admittedAt) / 1000);
      const sp = seq.speculation;
      if (sp && sp.cycles > 0) {
        const s = this.speculation;
        s.cycles += sp.cycles;
        s.drafted += sp.drafted;
        s.accepted += sp.accepted;
        const length = (sp.accepted + sp.cycles) / sp.cycles;
        const bucket = ACCEPTANCE_BUCKETS.findIndex((b) => length <= b);
        s.requestAcceptance[bucket < 0 ? ACCEPTANCE_BUCKETS.length : bucket]!++;
        s.requestAcceptanceSum += length;
      }
    };
    this.contextTokens = Math.min(model.contextTokens, plan.nPages * plan.pageTokens);
    this.timer = new StepTimer(plan.pageTokens);
    this.stallTargetMs = options.stallTargetMs ?? DEFAULTS.stallTargetMs;
    this.loopDone = this.loop();
  }

  generate(req: GenerateRequest): AsyncIterable<EngineEvent> {
    if (this.closed) throw new Error("the engine is closed");
    const promptTokens = req.prompt.length;
    if (promptTokens < 1) throw new RangeError("the prompt is empty");
    if (promptTokens >= this.contextTokens) throw new PromptTooLong(promptTokens, this.contextTokens);
    if (!(req.maxTokens >= 1)) throw new RangeError(`maxTokens must be at least 1 (got ${req.maxTokens})`);
    const maxTokens = Math.min(req.maxTokens, this.contextTokens - promptTokens);

    let seq: Sequence | undefined;
    const stream = new EventStream(() => {
      if (seq && !seq.cancelled) this.cancel(seq);
    });
    seq = new Sequence(this.nextId++, req, maxTokens, {
      admitted: (promptTokens, cachedPromptTokens) => stream.push({ type: "admitted", promptTokens, cachedPromptTokens }),
      tokens: (tokens) => stream.push({ type: "tokens", tokens }),
      done: (reason) => {
        req.signal.removeEventListener("abort", onAbort);
        const sp = seq?.speculation;
        const counts = sp && { cycles: sp.cycles, drafted: sp.drafted, accepted: sp.accepted, verifiedAt: [...sp.verifiedAt], acceptedAt: [...sp.acceptedAt] };
        stream.push(counts ? { type: "done", reason, speculation: counts } : { type: "done", reason });
        stream.end();
      },
      error: (e) => {
        req.signal.removeEventListener("abort", onAbort);
        stream.fail(e);
      },
    });
    const s = seq;
    const onAbort = () => this.cancel(s);
    if (req.signal.aborted) {
      stream.push({ type: "done", reason: "cancelled" });
      stream.end();
      return stream;
    }
    if (!this.scheduler.enqueue(seq)) throw new EngineOverloaded(Math.min(60, Math.max(1, Math.ceil(this.serviceSeconds))));
    req.signal.addEventListener("abort", onAbort, { once: true });
    this.wake();
    return stream;
  }

  stats(): EngineStats {
    return {
      running: this.scheduler.running.length,
      queued: this.scheduler.waiting.length,
      stateBytesInUse: this.cache.heldBytes + this.cache.cachedBytes,
      stateBytesBudget: this.plan.stateBytes,
      prefixCacheHitTokens: this.cache.hits.memory + this.cache.hits.disk,
      prefixCacheTiers: {
        memory: { hitTokens: this.cache.hits.memory, bytes: this.cache.cachedBytes },
        ...(this.disk ? { disk: { hitTokens: this.cache.hits.disk, ...this.disk.stats() } } : {}),
      },
      promptTokensComputed: this.scheduler.totals.promptTokens,
      generatedTokens: this.scheduler.totals.generatedTokens,
      sequenceStateBytes: this.cache.heldBytes,
      peakSequenceStateBytes: this.cache.peakHeldBytes,
      ...(this.model.drafter ? { speculation: { drafter: this.model.drafter.kind, ...this.speculation, requestAcceptance: [...this.speculation.requestAcceptance] } } : {}),
    };
  }

  // Ends every request as cancelled, stops the loop and frees the cache.
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.wake();
    await this.loopDone;
    this.scheduler.cancelAll();
    this.runner.close();
    await this.disk?.flush();
  }

  // ---- internal ----

  private cancel(seq: Sequence): void {
    this.scheduler.cancel(seq);
    this.wake();
  }

  private wake(): void {
    const wake = this.wakeLoop;
    this.wakeLoop = undefined;
    wake?.();
  }

  // Starts the disk reads of sequences admitted with part of their prefix on disk; each wakes the loop when done.
  private fetchLoads(): void {
    for (const seq of this.scheduler.running) {
      if (!seq.cache?.load || this.fetching.has(seq)) continue;
      this.fetching.add(seq);
      void this.cache
        .fetch(seq.cache)
        .catch(() => undefined)
        .then((data) => {
          this.fetching.delete(seq);
          this.fetched.push({ seq, data });
          this.wake();
        });
    }
  }

  private async loop(): Promise<void> {
    while (!this.closed) {
      this.scheduler.reap();
      for (const { seq, data } of this.fetched.splice(0)) this.scheduler.loaded(seq, data);
      this.scheduler.admit();
      this.fetchLoads();
      const plan = this.scheduler.schedule(this.timer.promptTokensWithin(this.stallTargetMs));
      if (!plan) {
        await new Promise<void>((resolve) => (this.wakeLoop = resolve));
        continue;
      }
      try {
        const policy = this.scheduler.policy;
        const cost = stepMeter(this.model.stepClock);
        const t0 = performance.now();
        // requests and aborts are read while the step computes; a step that resolves at once (a runner that computes
        // on this thread) still lets them in
        const [results] = await Promise.all([this.runner.step(plan.batch), nextTurn()]);
        this.timer.observe(plan.decodeTokens, plan.promptTokens, performance.now() - t0);
        /* decode-only steps: a verify row costs more than a prompt row (logits and a sample for every row) */
        if (policy && plan.promptTokens === 0) {
          const stepMs = cost();
          policy.observeStep(plan.decodeTokens, plan.draftTokens, stepMs);
          const emitted = results.reduce((n, r) => n + (r && !(r instanceof Error) ? 1 + (r.accepted?.length ?? 0) : 0), 0);
          const speculated = plan.draftTokens > 0 || plan.chunks.some((c) => c.verify);
          policy.observeDecode(emitted, stepMs, speculated);
        }
        this.scheduler.complete(plan, results);
      } catch (e) {
        const error = e instanceof Error ? e : new Error(String(e));
        log.error(`engine step failed: ${error.message}`);
        this.scheduler.fail(plan, error);
      }
    }
  }
}
