// The models this server serves, looked up by the `model` field of a request, and GET /v1/models.
import type { ChatModel } from "../chat/ir.ts";
import { ApiError } from "../api/errors.ts";

export class ModelRegistry {
  private byId: Map<string, ChatModel>;
  private readonly startedAt = Math.floor(Date.now() / 1000);

  constructor(readonly all: readonly ChatModel[]) {
    if (all.length === 0) throw new Error("a server needs at least one model");
    this.byId = new Map(all.map((m) => [m.id, m]));
  }

  get(id: string): ChatModel {
    const model = this.byId.get(id);
    if (model) return model;
    const served = this.all.map((m) => m.id).join(", ");
    throw new ApiError(404, `model '${id}' not found; this server serves: ${served}`, { param: "model", code: "model_not_found" });
  }

  // For requests where `model` may be left out (the token endpoints): the only model a server serves.
  getOrOnly(id: string | null | undefined): ChatModel {
    if (id != null) return this.get(id);
    if (this.all.length === 1) return this.all[0]!;
    throw new ApiError(400, `model: required field is missing (this server serves ${this.all.map((m) => m.id).join(", ")})`, { param: "model" });
  }

  // One entry shape that both OpenAI's list (`object`, `owned_by`, `created`) and Anthropic's (`type`,
  // `display_name`, `created_at`) clients read, plus the context length launchers configure agents with.
  entry(m: ChatModel) {
    return {
      id: m.id,
      object: "model",
      type: "model",
      created: this.startedAt,
      created_at: new Date(this.startedAt * 1000).toISOString(),
      owned_by: "splash",
      display_name: m.id,
      context_length: m.contextLength,
      max_output_tokens: m.maxOutputTokens,
    };
  }

  list() {
    const data = this.all.map((m) => this.entry(m));
    return { object: "list", data, has_more: false, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null };
  }
}
