// API-key check: `Authorization: Bearer <key>` (OpenAI clients, Claude Code's ANTHROPIC_AUTH_TOKEN) or
// `x-api-key: <key>` (Anthropic clients). Without a configured key every request is let through.
import { timingSafeEqual } from "node:crypto";
import { ApiError } from "../api/errors.ts";

export function checkApiKey(headers: Headers, apiKey: string | undefined): void {
  if (apiKey === undefined) return;
  const bearer = /^Bearer\s+(.+)$/i.exec(headers.get("authorization") ?? "")?.[1]?.trim();
  const offered = [bearer, headers.get("x-api-key")?.trim()].filter((k): k is string => !!k);
  if (offered.length === 0) throw new ApiError(401, "missing API key: send `Authorization: Bearer <key>` or `x-api-key: <key>`", { code: "missing_api_key" });
  if (!offered.some((k) => sameKey(k, apiKey))) throw new ApiError(401, "invalid API key", { code: "invalid_api_key" });
}

function sameKey(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
