// The last generations the server finished, newest first: a bounded ring the page's "last requests" table reads.
import type { FinishReason } from "../chat/ir.ts";

export type FinishedGeneration = {
  at: number; // when it ended (ms since the epoch)
  surface: string; // the API it came through: chat, responses, messages
  model: string;
  outcome: FinishReason | "error"; // "cancelled" also when the client went away
  error?: string; // with outcome "error"
  promptTokens: number;
  cachedPromptTokens: number;
  completionTokens: number;
  ttftMs: number | null; // arrival to first output token; null when none came
  durationMs: number; // arrival to end
};

export class RecentGenerations {
  private ring: FinishedGeneration[] = [];
  private next = 0;

  constructor(readonly capacity: number) {}

  add(g: FinishedGeneration): void {
    if (this.ring.length < this.capacity) this.ring.push(g);
    else this.ring[this.next] = g;
    this.next = (this.next + 1) % this.capacity;
  }

  // Newest first.
  list(): FinishedGeneration[] {
    const n = this.ring.length;
    return Array.from({ length: n }, (_, i) => this.ring[(this.next - 1 - i + n) % n]!);
  }
}
