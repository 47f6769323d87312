// The models Splash knows by name: the specs under models/<id>/spec.json, imported as JSON so `bun build --compile`
// carries them inside dist/splash. Lookup by id or alias (case-insensitive), and matching a checkpoint's config to
// the hub model it is.
import { join } from "node:path";
import { configMismatches, type CheckpointConfig } from "./config.ts";
import { isHubSpec, parseSpec, type HubModelSpec, type ModelSpec } from "./spec.ts";
import qwen38_27b from "../../models/qwen3.8-27b/spec.json" with { type: "json" };
import qwen36_35b_a3b from "../../models/qwen3.6-35b-a3b/spec.json" with { type: "json" };
import splashTiny from "../../models/splash-tiny/spec.json" with { type: "json" };

// The model every command uses when MODEL is omitted; its files ship inside the binary.
export const DEFAULT_MODEL_ID = "splash-tiny";

// models/ of the source tree: where an embedded model's files are when running from a checkout.
export const MODELS_DIR = join(import.meta.dir, "..", "..", "models");

const RAW: Record<string, unknown> = {
  "qwen3.8-27b": qwen38_27b,
  "qwen3.6-35b-a3b": qwen36_35b_a3b,
  "splash-tiny": splashTiny,
};

let parsed: ModelSpec[] | undefined;

// Every spec, validated once; a malformed spec is a build error, so it throws.
export function allSpecs(): ModelSpec[] {
  parsed ??= Object.entries(RAW).map(([id, json]) => {
    const spec = parseSpec(json, `models/${id}/spec.json`);
    if (spec.id !== id) throw new Error(`models/${id}/spec.json: id is ${spec.id}, expected ${id} (the directory name)`);
    return spec;
  });
  return parsed;
}

export function hubSpecs(): HubModelSpec[] {
  return allSpecs().filter(isHubSpec);
}

// A spec by id or alias; aliases include the official hub repository ("Qwen/Qwen3.8-27B").
export function findSpec(name: string): ModelSpec | undefined {
  const key = name.toLowerCase();
  return allSpecs().find((s) => s.id === key || s.aliases.some((a) => a.toLowerCase() === key));
}

// The hub model whose expected config a checkpoint matches exactly, if any.
export function specForConfig(cfg: CheckpointConfig): HubModelSpec | undefined {
  return hubSpecs().find((s) => s.architecture === cfg.architecture && configMismatches(s.config, cfg).length === 0);
}
