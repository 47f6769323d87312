// The thread a model computes on. libsplash's long calls (a step, an image through the vision tower) block
// their caller for as long as the model computes, so they run in a Worker of their own (call-thread-worker.ts), which
// opens the same library and makes the call; the JavaScript thread that serves HTTP, writes SSE, detokenizes and asks
// grammars for masks goes on meanwhile, and the promise settles when the call returns.
//
// Why this shape:
//  - Only the blocking call moves. The engine's loop, scheduler, prefix cache, admission, cancellation, grammar masks
//    and speculation policy stay on the JavaScript thread, between steps, exactly as with a synchronous call: the
//    thread changes when the model computes, not what happens at a step boundary.
//  - The caller builds the call's structs as for a blocking call and keeps them alive until the promise settles; the
//    worker gets their addresses (one process, one address space), so nothing is copied.
//  - A message each way costs less, and varies less, than a threadsafe JSCallback from a native thread (measured:
//    BENCHMARKS.md), and needs no asynchronous variant of each native entry point: any blocking call runs here by
//    name, with the library's per-thread error message read on the thread the call failed on.
//  - The engine loop in a Worker instead would make every request, token and grammar mask cross between threads;
//    here one message crosses each way per call.
//
// libsplash serializes the calls on one model (the model's lock, splash.h), so the calls the JavaScript thread still
// makes itself (the prefix cache's copies, between steps) are safe beside a call running here.
import { nativeError } from "./errors.ts";
import type { NativeLibrary } from "./library.ts";
import { workerUrl } from "../worker-url.ts";

// The blocking calls that run on the thread; every argument is a number (pointers as addresses).
export const THREAD_CALLS = ["splash_step", "splash_vision_encode"] as const;
export type ThreadCall = { fn: (typeof THREAD_CALLS)[number]; args: number[] };

// Makes the call on the calling thread; returns its status.
export function invoke(lib: NativeLibrary, call: ThreadCall): number {
  // pointers travel as addresses: every FFI pointer parameter takes one
  return (lib[call.fn] as unknown as (...args: number[]) => number)(...call.args);
}

export type ToThread = { type: "open"; path: string } | { type: "call"; id: number; call: ThreadCall };
export type FromThread = { type: "done"; id: number; status: number; error: string } | { type: "failed"; message: string };

type Pending = { call: ThreadCall; resolve: () => void; reject: (e: Error) => void };

export class CallThread {
  private readonly worker: Worker;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private failure: Error | null = null;
  private readonly waiters: (() => void)[] = []; // settled() callers

  constructor(libraryPath: string) {
    this.worker = new Worker(workerUrl("native/call-thread-worker.ts"));
    this.worker.onmessage = (e: MessageEvent<FromThread>) => {
      const m = e.data;
      if (m.type === "failed") return this.fail(new Error(`the model's call thread failed: ${m.message}`));
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      this.hold();
      if (m.status === 0) p.resolve();
      else p.reject(nativeError(p.call.fn, m.status, m.error));
    };
    this.worker.onerror = (e) => this.fail(new Error(`the model's call thread failed: ${e.message}`));
    this.hold();
    this.send({ type: "open", path: libraryPath });
  }

  // Resolves once no call is in flight (a shutdown waits for an image the tower is still encoding).
  settled(): Promise<void> {
    if (this.pending.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  // Makes the call on the thread. Every buffer it points at must stay alive and unchanged until the promise settles;
  // rejects with the call's NativeError.
  run(call: ThreadCall): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    const id = this.nextId++;
    return new Promise<void>((resolve, reject) => {
      this.pending.set(id, { call, resolve, reject });
      this.hold();
      this.send({ type: "call", id, call });
    });
  }

  // Ends the thread (no call may be in flight: the model is freed next).
  close(): void {
    if (this.pending.size > 0) throw new Error(`the model is still computing (${this.pending.size} calls in flight)`);
    this.worker.terminate();
  }

  private fail(e: Error): void {
    this.failure = e;
    for (const p of this.pending.values()) p.reject(e);
    this.pending.clear();
    this.hold();
  }

  // The worker keeps the process alive only while a call is in flight.
  private hold(): void {
    // Bun's Worker has ref/unref; the global type is the DOM's wherever the program references the DOM lib.
    const worker = this.worker as unknown as { ref(): void; unref(): void };
    if (this.pending.size > 0) return worker.ref();
    worker.unref();
    for (const resolve of this.waiters.splice(0)) resolve();
  }

  private send(m: ToThread): void {
    this.worker.postMessage(m);
  }
}
