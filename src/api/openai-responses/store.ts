// Stored responses, for `previous_response_id` and GET /v1/responses/{id}: a bounded in-memory LRU. Each entry
// keeps the response object and the whole conversation up to and including it (without instructions, which
// OpenAI does not carry over to the next response).
import type { Message } from "../../chat/ir.ts";

export type StoredResponse = { response: object; history: Message[] };

export class ResponseStore {
  private entries = new Map<string, StoredResponse>();

  constructor(private readonly capacity: number) {}

  put(id: string, entry: StoredResponse): void {
    this.entries.delete(id);
    this.entries.set(id, entry);
    while (this.entries.size > this.capacity) this.entries.delete(this.entries.keys().next().value!);
  }

  get(id: string): StoredResponse | undefined {
    const entry = this.entries.get(id);
    if (entry) {
      this.entries.delete(id);
      this.entries.set(id, entry);
    }
    return entry;
  }

  get size(): number {
    return this.entries.size;
  }
}
