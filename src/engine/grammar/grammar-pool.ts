// Grammar workers (grammar-worker.ts): xgrammar off the engine thread. A cold compile takes seconds on a 151K
// vocabulary and is one synchronous WebAssembly call, so it runs in a worker; web-xgrammar cannot hand a compiled
// grammar to another instance, so that worker keeps it and serves the matchers made from it, through a
// shared-memory channel the engine thread calls synchronously (tens of microseconds a call).
//
// A compile never goes to a worker that serves live matchers (their masks would wait for it): it takes an idle
// worker, or a new one up to MAX_WORKERS, or waits for one. So a request waits for its own grammar only (or, when
// its grammar is cached on a worker that is compiling another, for that compile). Each worker prepares the
// vocabulary itself when it starts; the first starts with the pool, at model load.
import { CHANNEL, channelBytes, channelViews, OP } from "./grammar-channel.ts";
import type { FromWorker, ToWorker } from "./grammar-worker.ts";
import type { Vocabulary } from "./vocab.ts";
import type { VocabTableData } from "./vocab-tables.ts";
import { workerUrl } from "../../worker-url.ts";

const MAX_WORKERS = 4;
const WORKER_URL = workerUrl("engine/grammar/grammar-worker.ts");
// A call that takes this long means the worker is gone (a call takes microseconds, a mask at most milliseconds).
const CALL_TIMEOUT_MS = 30_000;

// What a constraint needs from a matcher (the worker's xgrammar Matcher, through the channel).
export interface TokenMatcher {
  accept(token: number): boolean;
  rollback(n: number): void;
  fillMask(out: Uint32Array): void;
  dispose(): void;
}

type Pending = { resolve: (value: number) => void; reject: (e: Error) => void };

class GrammarWorker {
  readonly ready: Promise<void>;
  compiling: Promise<void> | null = null;
  live = 0; // matchers in use
  grammars = 0;
  private readonly worker: Worker;
  private readonly ctrl: Int32Array;
  private readonly mask: Uint32Array;
  private readonly error: Uint8Array;
  private readonly pending = new Map<number, Pending>(); // by compile id or matcher request
  private nextRequest = 1;
  private awaited = 0; // answers awaited from the worker
  private tablesPending: { resolve: (d: VocabTableData) => void; reject: (e: Error) => void } | null = null;
  private failure: Error | null = null;

  constructor(
    vocab: Vocabulary,
    private readonly onIdle: () => void,
  ) {
    const buffer = new SharedArrayBuffer(channelBytes(vocab.size));
    ({ ctrl: this.ctrl, mask: this.mask, error: this.error } = channelViews(buffer, vocab.size));
    this.worker = new Worker(WORKER_URL);
    this.ready = this.hold(new Promise<void>((resolve, reject) => {
      this.worker.onmessage = (e: MessageEvent<FromWorker>) => {
        const m = e.data;
        if (m.type === "ready") return resolve();
        if (m.type === "failed") return reject(new Error(`grammar worker: ${m.message}`));
        if (m.type === "tables" || m.type === "tables_failed") {
          const p = this.tablesPending;
          this.tablesPending = null;
          if (m.type === "tables") p?.resolve(m.data);
          else p?.reject(new Error(`grammar worker: ${m.message}`));
          return;
        }
        const key = m.type === "compiled" || m.type === "compile_failed" ? m.id : m.request;
        const p = this.pending.get(key);
        this.pending.delete(key);
        if (m.type === "compiled") p?.resolve(m.id);
        else if (m.type === "matcher") p?.resolve(m.id);
        else p?.reject(new Error(m.message));
      };
      this.worker.onerror = (e) => {
        this.failure = new Error(`grammar worker failed: ${e.message}`);
        reject(this.failure);
        for (const p of this.pending.values()) p.reject(this.failure);
        this.pending.clear();
        this.tablesPending?.reject(this.failure);
        this.tablesPending = null;
      };
    }));
    this.ready.catch(() => {});
    this.send({ type: "init", vocab, channel: buffer });
  }

  // Not failed or closed: a matcher there still has something to release.
  get alive(): boolean {
    return this.failure === null;
  }

  get idle(): boolean {
    return this.compiling === null && this.live === 0 && this.failure === null;
  }

  compile(id: number, ebnf: string): Promise<void> {
    const done = (async () => {
      await this.ready;
      await this.hold(
        new Promise<number>((resolve, reject) => {
          this.pending.set(id, { resolve, reject });
          this.send({ type: "compile", id, ebnf });
        }),
      );
      this.grammars++;
    })();
    this.compiling = done.then(
      () => {},
      () => {},
    );
    void this.compiling.then(() => {
      this.compiling = null;
      this.onIdle();
    });
    return done;
  }

  async matcher(grammar: number): Promise<TokenMatcher> {
    this.live++; // from now on no compile starts here
    try {
      while (this.compiling) await this.compiling;
      const request = this.nextRequest++;
      const id = await this.hold(
        new Promise<number>((resolve, reject) => {
          this.pending.set(-request, { resolve, reject });
          this.send({ type: "matcher", request: -request, grammar });
        }),
      );
      return new RemoteMatcher(this, id);
    } catch (e) {
      this.released();
      throw e;
    }
  }

  // Builds the vocabulary's tables (vocab-tables.ts) and keeps them at `path`.
  tables(path: string): Promise<VocabTableData> {
    return this.hold(
      new Promise<VocabTableData>((resolve, reject) => {
        this.tablesPending = { resolve, reject };
        this.send({ type: "tables", path });
      }),
    );
  }

  dispose(grammar: number): void {
    this.grammars--;
    this.send({ type: "dispose", id: grammar });
  }

  released(): void {
    if (--this.live === 0) this.onIdle();
  }

  // One synchronous call on the channel.
  call(op: number, a: number, b = 0): number {
    if (this.failure) throw this.failure;
    const ctrl = this.ctrl;
    ctrl[CHANNEL.OP] = op;
    ctrl[CHANNEL.A] = a;
    ctrl[CHANNEL.B] = b;
    Atomics.store(ctrl, CHANNEL.DONE, 0);
    Atomics.store(ctrl, CHANNEL.REQUEST, 1);
    Atomics.notify(ctrl, CHANNEL.REQUEST);
    while (Atomics.load(ctrl, CHANNEL.DONE) !== 1) {
      if (Atomics.wait(ctrl, CHANNEL.DONE, 0, CALL_TIMEOUT_MS) === "timed-out") {
        this.failure = new Error(`grammar worker did not answer within ${CALL_TIMEOUT_MS / 1000} s`);
        throw this.failure;
      }
    }
    const length = ctrl[CHANNEL.ERROR_LENGTH]!;
    if (length > 0) throw new Error(new TextDecoder().decode(this.error.slice(0, length)));
    return ctrl[CHANNEL.RESULT]!;
  }

  copyMask(out: Uint32Array): void {
    out.set(this.mask);
  }

  // A call after this fails at once rather than waiting out CALL_TIMEOUT_MS on a thread that is gone (a request still
  // releasing its matcher when the model closes).
  terminate(): void {
    this.failure = new Error("grammar worker closed");
    this.worker.terminate();
  }

  // The worker keeps the process alive only while an answer is awaited: an idle pool lets it exit.
  private hold<T>(answer: Promise<T>): Promise<T> {
    // Bun's Worker has ref/unref; the global type is the DOM's wherever the program references the DOM lib (the
    // page's code does).
    const worker = this.worker as unknown as { ref(): void; unref(): void };
    if (this.awaited++ === 0) worker.ref();
    const release = () => {
      if (--this.awaited === 0) worker.unref();
    };
    answer.then(release, release);
    return answer;
  }

  private send(m: ToWorker): void {
    this.worker.postMessage(m);
  }
}

class RemoteMatcher implements TokenMatcher {
  constructor(
    private readonly worker: GrammarWorker,
    private readonly id: number,
  ) {}

  accept(token: number): boolean {
    return this.worker.call(OP.ACCEPT, this.id, token) === 1;
  }

  rollback(n: number): void {
    this.worker.call(OP.ROLLBACK, this.id, n);
  }

  fillMask(out: Uint32Array): void {
    this.worker.call(OP.MASK, this.id);
    this.worker.copyMask(out);
  }

  dispose(): void {
    try {
      if (this.worker.alive) this.worker.call(OP.RELEASE, this.id);
    } finally {
      this.worker.released();
    }
  }
}

// A grammar compiled in one of the pool's workers.
export class RemoteGrammar {
  constructor(
    private readonly worker: GrammarWorker,
    private readonly id: number,
  ) {}

  matcher(): Promise<TokenMatcher> {
    return this.worker.matcher(this.id);
  }

  dispose(): void {
    this.worker.dispose(this.id);
  }
}

export class GrammarPool {
  private readonly workers: GrammarWorker[] = [];
  private waiting: (() => void)[] = [];
  private nextGrammar = 1;

  constructor(private readonly vocab: Vocabulary) {
    this.spawn();
  }

  // The first worker has prepared the vocabulary.
  ready(): Promise<void> {
    return this.workers[0]!.ready;
  }

  // The vocabulary's tables, built by the first worker and kept at `path`.
  tables(path: string): Promise<VocabTableData> {
    return this.workers[0]!.tables(path);
  }

  // Compiles in an idle worker (picked and marked busy without yielding, so two compiles never share one).
  async compile(ebnf: string): Promise<RemoteGrammar> {
    for (;;) {
      const worker = this.workers.filter((w) => w.idle).sort((a, b) => a.grammars - b.grammars)[0] ?? (this.workers.length < MAX_WORKERS ? this.spawn() : null);
      if (worker) {
        const id = this.nextGrammar++;
        await worker.compile(id, ebnf);
        return new RemoteGrammar(worker, id);
      }
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    }
  }

  close(): void {
    for (const w of this.workers) w.terminate();
  }

  private spawn(): GrammarWorker {
    const w = new GrammarWorker(this.vocab, () => {
      const waiting = this.waiting;
      this.waiting = [];
      for (const wake of waiting) wake();
    });
    this.workers.push(w);
    return w;
  }
}
