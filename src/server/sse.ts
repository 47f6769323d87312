// The one SSE writer: runs a surface's encoder over a generation and streams the frames.
//
// - The encoder's opening frames go out at once, so the response headers do too (Bun sends them with the first
//   body bytes); a client then knows it is being served while the prompt is prefilled.
// - While no frame is ready for pingIntervalMs, the encoder's ping is written: Claude Code aborts a stream idle for
//   5 minutes, Codex after 300 s.
// - An error after the stream began is written as the surface's error event, and the stream ends.
// - When the client goes away, `abort` cancels the generation at once: a generator blocked in an await would
//   otherwise notice only when its next event arrives.
// - The request's log line is written when the stream ends, however it ends.
import { toApiError, type ErrorShape } from "../api/errors.ts";
import { encodeFrame, type SseFrame, type StreamEncoder } from "../api/frames.ts";
import type { Generation } from "./generation.ts";
import type { RequestLog, RequestRecord } from "./request-log.ts";
import { log } from "../log.ts";

export type SseOptions = {
  pingIntervalMs: number;
  shape: ErrorShape;
  abort: () => void;
  onError: () => void;
  requests: RequestLog;
  record: RequestRecord;
};

export function sseResponse(encoder: StreamEncoder, generation: Generation, opts: SseOptions): Response {
  const encoder8 = new TextEncoder();
  const it = generation[Symbol.asyncIterator]();
  let closed = false;
  opts.record.streaming = true;
  const ended = () => opts.requests.end(opts.record, 200);
  const stream = new ReadableStream<Uint8Array>({
    async start(controller) {
      const write = (frames: SseFrame[]) => {
        if (closed || frames.length === 0) return;
        try {
          controller.enqueue(encoder8.encode(frames.map(encodeFrame).join("")));
        } catch {
          closed = true; // the client is gone; cancel() does the rest
        }
      };
      write(encoder.open());
      try {
        for (;;) {
          const next = await withPings(it.next(), opts.pingIntervalMs, () => write([encoder.ping]));
          if (closed) break;
          if (next.done) break;
          write(encoder.event(next.value));
        }
        write(encoder.close());
      } catch (e) {
        if (!closed) {
          const error = toApiError(e, opts.shape);
          if (error.status === 500) log.error(e);
          opts.record.error = error.message;
          opts.onError();
          write(encoder.fail(error));
        }
      } finally {
        if (!closed) {
          closed = true;
          controller.close();
        }
        ended();
      }
    },
    cancel() {
      closed = true;
      opts.record.finish ??= "cancelled";
      opts.abort();
      it.return?.(undefined).catch(() => {});
      ended();
    },
  });
  return new Response(stream, {
    headers: { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", connection: "keep-alive", "x-accel-buffering": "no" },
  });
}

function withPings<T>(promise: Promise<T>, intervalMs: number, ping: () => void): Promise<T> {
  const timer = setInterval(ping, intervalMs);
  return promise.finally(() => clearInterval(timer));
}
