// What a streaming surface hands the server's SSE writer: frames, in order. Each surface has one encoder that turns
// ChatEvents into its own events; the writer adds pings while nothing else is sent and ends the stream.
import type { ChatEvent } from "../chat/ir.ts";
import type { ApiError } from "./errors.ts";

export type SseFrame = { event?: string; data: string } | { comment: string };

export interface StreamEncoder {
  open(): SseFrame[]; // sent at once, so the response headers go out before a long prefill
  event(event: ChatEvent): SseFrame[];
  close(): SseFrame[]; // after the last event
  fail(error: ApiError): SseFrame[]; // an error after the stream began, in the surface's format
  readonly ping: SseFrame; // keeps idle-timeout clients (Claude Code: 5 min) from giving up during prefill
}

export function encodeFrame(frame: SseFrame): string {
  if ("comment" in frame) return `: ${frame.comment}\n\n`;
  return frame.event ? `event: ${frame.event}\ndata: ${frame.data}\n\n` : `data: ${frame.data}\n\n`;
}

export const json = (value: unknown): string => JSON.stringify(value);
