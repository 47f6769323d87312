// One error type for every API surface, and its two renderings.
//
// Anything that goes wrong while serving a request is an ApiError by the time it reaches a client: thrown by a
// converter (bad field, unknown model, images for a text-only model), by the server (auth, routing, parsing), or
// mapped from the engine (EngineOverloaded, PromptTooLong, a grammar's ConstraintError). Each surface renders it in
// its own shape: OpenAI's `{error:{message,type,param,code}}` or Anthropic's `{type:"error",error:{type,message}}`.
// Agents match on these (Claude Code retries on wording and type, Codex on `code`), so the shapes follow the vendors'
// exactly.
import type { z } from "zod";
import { ConstraintError } from "../engine/grammar/request.ts";
import { EngineOverloaded, PromptTooLong } from "../engine/types.ts";
import { ImageError } from "../vision/image-error.ts";
import { TemplateRenderError } from "../chat/template.ts";

export type ErrorShape = "openai" | "anthropic";

export class ApiError extends Error {
  override name = "ApiError";
  constructor(
    readonly status: number,
    message: string,
    readonly details: { param?: string; code?: string; retryAfterSeconds?: number } = {},
  ) {
    super(message);
  }
}

export const invalidRequest = (message: string, param?: string, code?: string) => new ApiError(400, param ? `${param}: ${message}` : message, { param, code });

// A structured-output request the grammar cannot enforce, as a 400 naming `param` (the surface's field; response-format.ts
// maps the IR's names) and, in the message, the schema keyword and where it is.
export function constraintApiError(e: ConstraintError, param: string): ApiError {
  return invalidRequest(e.message, param, e.keyword ? "unsupported_schema" : "invalid_structured_output");
}

// Maps anything thrown while serving to an ApiError. Unknown errors become a 500 whose message is the error's own:
// a local server has no secrets to hide from its user, and the text is what helps. `conversation` names the
// surface's field that holds the conversation (Responses: "input"), for the errors that are about it.
export function toApiError(error: unknown, shape: ErrorShape, conversation = "messages"): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof TemplateRenderError) return invalidRequest(error.message, conversation, "invalid_conversation");
  if (error instanceof ConstraintError) return constraintApiError(error, error.param);
  if (error instanceof ImageError) return invalidRequest(error.message, undefined, IMAGE_ERROR_CODES[error.reason]);
  if (error instanceof EngineOverloaded) {
    return new ApiError(503, error.message, { code: "server_is_overloaded", retryAfterSeconds: error.retryAfterSeconds });
  }
  if (error instanceof PromptTooLong) {
    // Claude Code compacts the conversation when it sees Anthropic's wording (kept exactly, with the lower bound
    // when the prompt was refused before it was tokenized whole); OpenAI clients look at the code.
    const message =
      shape === "anthropic"
        ? `prompt is too long: ${error.promptTokens} tokens > ${error.contextTokens} maximum`
        : `This model's maximum context length is ${error.contextTokens} tokens, but the prompt is ${error.atLeast ? "at least " : ""}${error.promptTokens} tokens. Please reduce the length of the messages.`;
    return new ApiError(400, message, { code: "context_length_exceeded" });
  }
  const message = error instanceof Error ? error.message : String(error);
  return new ApiError(500, `internal error: ${message}`, { code: "internal_error" });
}

// A bad image is the client's to fix: corrupt, an unsupported format, over the size limits, or a URL not fetched.
const IMAGE_ERROR_CODES: Record<ImageError["reason"], string> = {
  corrupt: "invalid_image",
  unsupported: "unsupported_image",
  too_large: "image_too_large",
  fetch: "invalid_image_url",
};

const OPENAI_TYPES: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "invalid_request_error",
  413: "invalid_request_error",
  429: "rate_limit_error",
  503: "server_error",
};

const ANTHROPIC_TYPES: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "not_found_error",
  413: "request_too_large",
  429: "rate_limit_error",
  503: "overloaded_error",
};

export function openaiErrorBody(e: ApiError) {
  const type = OPENAI_TYPES[e.status] ?? (e.status >= 500 ? "server_error" : "invalid_request_error");
  return { error: { message: e.message, type, param: e.details.param ?? null, code: e.details.code ?? null } };
}

export function anthropicErrorBody(e: ApiError) {
  const type = ANTHROPIC_TYPES[e.status] ?? (e.status >= 500 ? "api_error" : "invalid_request_error");
  return { type: "error" as const, error: { type, message: e.message } };
}

export function errorBody(e: ApiError, shape: ErrorShape) {
  return shape === "anthropic" ? anthropicErrorBody(e) : openaiErrorBody(e);
}

export function errorResponse(e: ApiError, shape: ErrorShape): Response {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (e.details.retryAfterSeconds !== undefined) headers["retry-after"] = String(Math.max(1, Math.ceil(e.details.retryAfterSeconds)));
  return new Response(JSON.stringify(errorBody(e, shape)), { status: e.status, headers });
}

// A schema violation as one readable line naming the field (`messages.0.content: expected string or array`).
// zod reports a failed union as one issue per branch; the branch that got furthest into the value is the one the
// client meant, so its first issue is the one worth reporting.
export function describeIssue(issue: z.core.$ZodIssue, base: PropertyKey[] = []): { param: string; message: string } {
  const path = [...base, ...issue.path];
  if (issue.code === "invalid_union" && issue.errors.length > 0) {
    const firsts = issue.errors.map((branch) => branch[0]).filter((i): i is z.core.$ZodIssue => i !== undefined);
    const atRoot = firsts.every((i) => i.code === "invalid_type" && i.path.length === 0);
    if (atRoot) {
      const expected = [...new Set(firsts.map((i) => (i.code === "invalid_type" ? i.expected : "")))].join(" or ");
      const received = /received (\w+)/.exec(firsts[0]?.message ?? "")?.[1];
      if (received === "undefined") return { param: formatPath(path), message: "required field is missing" };
      return { param: formatPath(path), message: `expected ${expected}${received ? `, received ${received}` : ""}` };
    }
    const deepest = firsts.reduce((a, b) => (depth(b) > depth(a) ? b : a));
    return describeIssue(deepest, path);
  }
  if (issue.code === "invalid_union" && "discriminator" in issue) {
    const options = "options" in issue && Array.isArray(issue.options) ? issue.options.map(String).join(", ") : "";
    return { param: formatPath(path), message: `unknown ${String(issue.discriminator)}${options ? `; expected one of ${options}` : ""}` };
  }
  const message = /received undefined$/.test(issue.message) ? "required field is missing" : issue.message.replace(/^Invalid input: /, "");
  return { param: formatPath(path), message };
}

function depth(issue: z.core.$ZodIssue): number {
  return issue.path.length + (issue.code === "invalid_union" ? 1 : 0);
}

function formatPath(path: PropertyKey[]): string {
  return path.length === 0 ? "body" : path.map(String).join(".");
}
