// Which server a MODEL argument means, before anything is loaded: the key its state file is found by, and the
// limits the model's spec promises (what --print-config shows when no server runs yet; a running server's own
// figures replace them).
import { existsSync } from "node:fs";
import { isAbsolute, resolve } from "node:path";
import { CliError } from "../cli/_command.ts";
import { ConfigError, readCheckpointConfig } from "../models/config.ts";
import { ensureModelFiles } from "../models/resolve.ts";
import { allSpecs, DEFAULT_MODEL_ID, findSpec } from "../models/registry.ts";
import { serveCommand, type StartSpec } from "./server.ts";

// Outputs are capped like a loaded generic checkpoint's (src/models/load.ts).
const GENERIC_MAX_OUTPUT = 32768;

function expandHome(arg: string): string {
  return arg.startsWith("~") ? arg.replace(/^~/, process.env.HOME ?? "~") : arg;
}

function isDirectoryArg(arg: string): boolean {
  return isAbsolute(arg) || arg.startsWith(".") || arg.startsWith("~") || existsSync(arg);
}

// A model id for a supported or embedded model, the absolute path for a checkpoint directory, else the name as given.
export function modelKey(arg: string | undefined): string {
  if (arg === undefined) return DEFAULT_MODEL_ID;
  const spec = findSpec(arg);
  if (spec) return spec.id;
  return isDirectoryArg(arg) ? resolve(expandHome(arg)) : arg;
}

export type Limits = { contextLength: number; maxOutputTokens: number };

export function specLimits(key: string): Limits {
  const spec = findSpec(key);
  if (spec) return { contextLength: spec.contextLength, maxOutputTokens: spec.maxOutputTokens };
  if (isAbsolute(key) && existsSync(key)) {
    try {
      const ctx = Number(readCheckpointConfig(key).text.max_position_embeddings);
      if (Number.isInteger(ctx) && ctx > 0) return { contextLength: ctx, maxOutputTokens: Math.min(GENERIC_MAX_OUTPUT, ctx) };
    } catch (e) {
      if (!(e instanceof ConfigError)) throw e;
      throw new CliError(e.message, "MODEL is a supported model id (see `splash models`) or a Qwen3.5-family checkpoint directory");
    }
  }
  throw new CliError(`no model or directory named ${key}`, `supported models: ${allSpecs().map((s) => s.id).join(", ")}; or pass a checkpoint directory`);
}

// Resolves the argument for `splash serve` (offering the download of a supported model on a terminal, as serve does).
export async function startSpec(arg: string | undefined, key: string): Promise<StartSpec> {
  const resolved = await ensureModelFiles(arg, { interactive: process.stdin.isTTY === true });
  const serveArg = resolved.kind === "local" ? resolved.dir : arg === undefined ? undefined : resolved.id;
  return { key, model: resolved.id, command: (port, apiKey) => serveCommand(serveArg, port, apiKey) };
}
