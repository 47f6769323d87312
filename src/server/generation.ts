// Starting a generation for a request, timing it, and learning early whether it failed.
//
// The engine rejects a request (overloaded, prompt too long) when it is submitted, i.e. on the first next() of the
// event stream. A streaming response would rather answer that with a real HTTP status (clients retry 503s with
// Retry-After, and Claude Code compacts on "prompt is too long") than with an error event after a 200. So the first
// event is awaited for a short while before the stream is opened; a generation that is merely slow (a queue wait,
// a long prefill) gets its 200 and pings after that, and any later failure becomes an error event.
import type { ChatEvent, ChatModel, Conversation, GenerationOptions } from "../chat/ir.ts";
import { toApiError, type ErrorShape } from "../api/errors.ts";
import type { Metrics } from "./metrics.ts";

export type Generation = AsyncIterable<ChatEvent>;

export async function startGeneration(
  model: ChatModel,
  conversation: Conversation,
  options: GenerationOptions,
  ctx: { metrics: Metrics; shape: ErrorShape; arrivedAt: number; waitMs: number; conversation?: string },
): Promise<Generation> {
  const it = timed(model, conversation, options, ctx.metrics, ctx.arrivedAt)[Symbol.asyncIterator]();
  const first = it.next();
  first.catch(() => {}); // observed below or by the stream; never an unhandled rejection
  const waited = Promise.withResolvers<undefined>();
  const timer = setTimeout(() => waited.resolve(undefined), ctx.waitMs);
  const early = await Promise.race([first.then(() => undefined, (e: unknown) => ({ error: e })), waited.promise]);
  clearTimeout(timer);
  if (early) throw toApiError(early.error, ctx.shape, ctx.conversation);
  return {
    async *[Symbol.asyncIterator]() {
      try {
        const r = await first;
        if (r.done) return;
        yield r.value;
        for (let n = await it.next(); !n.done; n = await it.next()) yield n.value;
      } finally {
        await it.return?.(undefined);
      }
    },
  };
}

// The model's events, with the server's timings and token counts recorded as they pass.
async function* timed(model: ChatModel, conversation: Conversation, options: GenerationOptions, metrics: Metrics, arrivedAt: number): AsyncGenerator<ChatEvent> {
  metrics.generationStarted(model.id);
  let firstAt: number | undefined;
  try {
    for await (const event of model.generate(conversation, options)) {
      if (firstAt === undefined && (event.type === "reasoning" || event.type === "content" || event.type === "tool_call_start")) {
        firstAt = performance.now();
        metrics.firstToken(model.id, (firstAt - arrivedAt) / 1000);
      }
      if (event.type === "done") {
        metrics.usage(model.id, event.usage);
        if (firstAt !== undefined && event.usage.completionTokens > 1) {
          metrics.perToken(model.id, (performance.now() - firstAt) / 1000 / (event.usage.completionTokens - 1));
        }
      }
      yield event;
    }
  } finally {
    metrics.generationEnded(model.id);
  }
}
