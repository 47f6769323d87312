// A grammar worker: one xgrammar instance (xgrammar.ts) in its own thread, owning the compiled grammars it made and
// the matchers made from them (web-xgrammar cannot move a compiled grammar between instances). grammar-pool.ts is
// the other side. Compiles and new matchers are messages, answered by messages; calls on a matcher arrive on a
// shared-memory channel, which the engine thread calls synchronously and this thread answers between messages.
import { CHANNEL, channelViews, OP } from "./grammar-channel.ts";
import type { Vocabulary } from "./vocab.ts";
import { buildTables, tableBuffers, writeTables, type VocabTableData } from "./vocab-tables.ts";
import { XgrammarVocab, type Matcher } from "./xgrammar.ts";

declare const self: Worker;

export type ToWorker =
  | { type: "init"; vocab: Vocabulary; channel: SharedArrayBuffer }
  | { type: "compile"; id: number; ebnf: string }
  | { type: "matcher"; request: number; grammar: number }
  | { type: "tables"; path: string }
  | { type: "dispose"; id: number };
export type FromWorker =
  | { type: "ready" }
  | { type: "failed"; message: string }
  | { type: "compiled"; id: number }
  | { type: "compile_failed"; id: number; message: string }
  | { type: "matcher"; request: number; id: number }
  | { type: "matcher_failed"; request: number; message: string }
  | { type: "tables"; data: VocabTableData }
  | { type: "tables_failed"; message: string };

let vocab: Vocabulary | undefined;
let xg: XgrammarVocab | undefined;
const grammars = new Map<number, Awaited<ReturnType<XgrammarVocab["compile"]>>>();
const matchers = new Map<number, Matcher>();
let nextMatcher = 1;

const post = (m: FromWorker) => postMessage(m);

self.onmessage = async (e: MessageEvent<ToWorker>) => {
  const m = e.data;
  if (m.type === "init") {
    vocab = m.vocab;
    try {
      xg = await XgrammarVocab.create(m.vocab);
    } catch (err) {
      return post({ type: "failed", message: (err as Error).message });
    }
    post({ type: "ready" });
    void serve(m.channel);
  } else if (m.type === "compile") {
    try {
      grammars.set(m.id, await xg!.compile(m.ebnf));
      post({ type: "compiled", id: m.id });
    } catch (err) {
      post({ type: "compile_failed", id: m.id, message: (err as Error).message });
    }
  } else if (m.type === "tables") {
    try {
      const data = buildTables(vocab!);
      try {
        writeTables(m.path, data);
      } catch {
        // a read-only cache directory: the tables are rebuilt at the next load
      }
      postMessage({ type: "tables", data } satisfies FromWorker, tableBuffers(data));
    } catch (err) {
      post({ type: "tables_failed", message: (err as Error).message });
    }
  } else if (m.type === "matcher") {
    try {
      const compiled = grammars.get(m.grammar);
      if (!compiled) throw new Error(`grammar ${m.grammar} is not in this worker`);
      const id = nextMatcher++;
      matchers.set(id, await xg!.matcher(compiled));
      post({ type: "matcher", request: m.request, id });
    } catch (err) {
      post({ type: "matcher_failed", request: m.request, message: (err as Error).message });
    }
  } else {
    grammars.get(m.id)?.dispose();
    grammars.delete(m.id);
  }
};

// Answers matcher calls until the thread ends: each wakes this loop through the channel's request word.
async function serve(buffer: SharedArrayBuffer): Promise<void> {
  const { ctrl, mask, error } = channelViews(buffer, xg!.vocab.size);
  for (;;) {
    const wait = Atomics.waitAsync(ctrl, CHANNEL.REQUEST, 0);
    if (wait.async) await wait.value;
    if (Atomics.load(ctrl, CHANNEL.REQUEST) !== 1) continue; // a wake without a request
    let result = 0;
    try {
      result = call(ctrl[CHANNEL.OP]!, ctrl[CHANNEL.A]!, ctrl[CHANNEL.B]!, mask);
      ctrl[CHANNEL.ERROR_LENGTH] = 0;
    } catch (err) {
      const text = new TextEncoder().encode(String((err as Error).message ?? err)).subarray(0, error.length);
      error.set(text);
      ctrl[CHANNEL.ERROR_LENGTH] = text.length;
    }
    ctrl[CHANNEL.RESULT] = result;
    Atomics.store(ctrl, CHANNEL.REQUEST, 0);
    Atomics.store(ctrl, CHANNEL.DONE, 1);
    Atomics.notify(ctrl, CHANNEL.DONE);
  }
}

function call(op: number, a: number, b: number, mask: Uint32Array): number {
  switch (op) {
    case OP.ACCEPT:
      return matcher(a).accept(b) ? 1 : 0;
    case OP.ROLLBACK:
      matcher(a).rollback(b);
      return 0;
    case OP.MASK:
      matcher(a).fillMask(mask);
      return 0;
    case OP.RELEASE:
      matcher(a).dispose();
      matchers.delete(a);
      return 0;
    default:
      throw new Error(`unknown grammar worker call ${op}`);
  }
}

function matcher(id: number): Matcher {
  const m = matchers.get(id);
  if (!m) throw new Error(`matcher ${id} is not in this worker`);
  return m;
}
