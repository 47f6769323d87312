// One request's events, from the engine loop (push) to the caller's `for await` (pull). Unbounded: events are a few
// tokens each and the loop must never wait on a slow reader. When the reader stops early (break, a thrown error, a
// closed connection), `onReturn` runs so the engine can release the request.
import type { EngineEvent } from "./types.ts";

export class EventStream implements AsyncIterable<EngineEvent> {
  private readonly queue: EngineEvent[] = [];
  private ended = false;
  private failure: Error | undefined;
  private wake: (() => void) | undefined;

  constructor(private readonly onReturn: () => void) {}

  push(e: EngineEvent): void {
    this.queue.push(e);
    this.notify();
  }

  end(): void {
    this.ended = true;
    this.notify();
  }

  fail(e: Error): void {
    this.failure = e;
    this.ended = true;
    this.notify();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<EngineEvent> {
    let finished = false;
    try {
      for (;;) {
        while (this.queue.length > 0) yield this.queue.shift()!;
        if (this.failure) throw this.failure;
        if (this.ended) break;
        await new Promise<void>((resolve) => (this.wake = resolve));
      }
      finished = true;
    } finally {
      if (!finished) this.onReturn();
    }
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }
}
