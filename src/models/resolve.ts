// Resolution of a MODEL argument (the CLI contract: a supported model id, a local checkpoint directory, or omitted
// for the embedded default) to the files a command loads:
//   omitted                → the embedded model (splash-tiny), files beside its spec
//   a supported id / alias → its snapshot in the hub cache, in the first installed format native loads (spec default
//                            first), or the --format asked for;
//                            its config must match the spec exactly, else it is refused naming the key
//   a directory            → that checkpoint, matched to a spec by its config when one matches, else run generically
// A model imported with `splash import` (a packed directory in the Splash cache, packed.ts) is taken before its
// source, the spec's default quant level first; `source: true` asks for the source itself (import does).
// `ensureModelFiles` is what serve/run call: a supported model that is not downloaded is offered for download on a
// terminal, and is otherwise an error carrying the exact `splash pull` command.
import { existsSync, statSync } from "node:fs";
import { basename, isAbsolute, join, resolve } from "node:path";
import { formatBytes } from "../format.ts";
import { CliError } from "../cli/_command.ts";
import { ConfigError, configMismatches, describeMismatch, readCheckpointConfig, type CheckpointConfig } from "./config.ts";
import { checkWeightFiles } from "./files.ts";
import { formatPreference, installedDrafter, installedFormats } from "./installed.ts";
import { installedPacked, PACKED_FILE, readPackedHeader, type PackedQuant } from "./packed.ts";
import { pullModel, type PullModelOptions } from "./pull-model.ts";
import { embeddedModelDir } from "./embedded.ts";
import { allSpecs, DEFAULT_MODEL_ID, findSpec, MODELS_DIR, specForConfig } from "./registry.ts";
import { isHubSpec, type Format, type HubModelSpec, type ModelSpec } from "./spec.ts";

// `packed`: the directory is a `splash import` output (model.splash) at that level, not the source checkpoint.
export type ResolvedModel =
  | { kind: "embedded"; id: string; spec: ModelSpec; dir: string; packed?: PackedQuant }
  | { kind: "hub"; id: string; spec: HubModelSpec; format: Format; repo: string; commit: string; dir: string; config: CheckpointConfig; drafterDir?: string; packed?: PackedQuant }
  | { kind: "local"; id: string; spec: HubModelSpec | undefined; format: Format; dir: string; config: CheckpointConfig; packed?: PackedQuant };

// A supported model none of whose formats is downloaded.
export class ModelNotDownloaded extends CliError {
  override name = "ModelNotDownloaded";
  constructor(readonly spec: HubModelSpec) {
    super(
      `${spec.displayName} is not downloaded (${formatBytes(spec.memory?.download[spec.defaultFormat] ?? 0)} in ${spec.defaultFormat} from ${spec.sources[spec.defaultFormat]!.repo})`,
      `run \`splash pull ${spec.id}\` to download it`,
    );
  }
}

// The imported (packed) directory of a model, the spec's default level first. A damaged one is an error, not a
// reason to fall back silently: it names the file and says to import again.
function packedOf(spec: ModelSpec): { dir: string; quant: PackedQuant } | undefined {
  const first: PackedQuant = spec.quantization?.default === "q8" ? "q8" : "q4";
  for (const quant of [first, first === "q4" ? "q8" : "q4"] as const) {
    const p = installedPacked(spec.id, quant);
    if (p && !p.complete) throw new CliError(`the imported ${spec.id} (${quant}) in ${p.dir} is damaged: ${p.problem}`, `delete ${p.dir} and run \`splash import ${spec.id} --quant ${quant}\` again`);
    if (p) return { dir: p.dir, quant };
  }
  return undefined;
}

function looksLikePath(arg: string): boolean {
  return isAbsolute(arg) || arg.startsWith(".") || arg.startsWith("~") || (arg.includes("/") && existsSync(arg));
}

function formatOf(cfg: CheckpointConfig): Format {
  return cfg.mlx ? (cfg.mlx.bits === 4 ? "mlx-4bit" : "mlx-8bit") : "bf16";
}

function readConfig(dir: string): CheckpointConfig {
  try {
    return readCheckpointConfig(dir);
  } catch (e) {
    if (e instanceof ConfigError) throw new CliError(e.message, "MODEL is a supported model id (see `splash models`) or a Qwen3.5-family checkpoint directory");
    throw e;
  }
}

function resolveDirectory(arg: string): ResolvedModel {
  const dir = resolve(arg.startsWith("~") ? arg.replace(/^~/, process.env.HOME ?? "~") : arg);
  if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new CliError(`${arg} is not a directory`, "MODEL is a supported model id (see `splash models`) or a checkpoint directory");
  const config = readConfig(dir);
  const packed = existsSync(join(dir, PACKED_FILE)) ? (readPackedHeader(join(dir, PACKED_FILE)).meta.quant as PackedQuant) : undefined;
  if (!packed) checkWeightFiles(dir);
  const spec = specForConfig(config);
  return { kind: "local", id: spec?.id ?? basename(dir), spec, format: formatOf(config), dir, config, ...(packed ? { packed } : {}) };
}

function resolveHub(spec: HubModelSpec, format: Format | undefined, anyFormat: boolean, source: boolean): ResolvedModel {
  const packed = format || anyFormat || source ? undefined : packedOf(spec);
  if (packed) {
    const meta = readPackedHeader(join(packed.dir, PACKED_FILE)).meta as { source?: { repo?: string; commit?: string } };
    const drafter = installedDrafter(spec);
    return { kind: "hub", id: spec.id, spec, format: "bf16", repo: meta.source?.repo ?? "", commit: meta.source?.commit ?? "", dir: packed.dir, config: readConfig(packed.dir), drafterDir: drafter?.complete ? drafter.dir : undefined, packed: packed.quant };
  }
  const installed = installedFormats(spec);
  const chosen = format ?? formatPreference(spec).find((f) => installed[f]?.complete);
  const found = chosen && installed[chosen];
  if (!chosen || !found?.complete) {
    if (format && found) throw new CliError(`${spec.displayName} ${format} is only partly downloaded: ${found.problem}`, `run \`splash pull ${spec.id} --format ${format}\` to finish it`);
    if (format) throw new CliError(`${spec.displayName} ${format} is not downloaded`, `run \`splash pull ${spec.id} --format ${format}\` to download it`);
    throw new ModelNotDownloaded(spec);
  }
  const config = readConfig(found.dir);
  const mismatches = configMismatches(spec.config, config);
  if (mismatches.length > 0) {
    throw new CliError(
      `${found.dir} does not match ${spec.displayName}: ${mismatches.slice(0, 3).map(describeMismatch).join("; ")}`,
      `these are not the files Splash expects for ${spec.id}; pass the directory itself to run it as a generic checkpoint`,
    );
  }
  const drafter = installedDrafter(spec);
  return { kind: "hub", id: spec.id, spec, format: chosen, repo: found.repo, commit: found.commit, dir: found.dir, config, drafterDir: drafter?.complete ? drafter.dir : undefined };
}

function unknownModel(arg: string): CliError {
  return new CliError(`no model or directory named ${arg}`, `supported models: ${allSpecs().map((s) => s.id).join(", ")} (see \`splash models\`); or pass a checkpoint directory`);
}

function resolveEmbedded(spec: ModelSpec, source: boolean): ResolvedModel {
  const packed = source ? undefined : packedOf(spec);
  if (packed) return { kind: "embedded", id: spec.id, spec, dir: packed.dir, packed: packed.quant };
  return { kind: "embedded", id: spec.id, spec, dir: embeddedModelDir(join(MODELS_DIR, spec.id)) };
}

// anyFormat: take any installed format (`splash verify`); source: the downloaded or embedded checkpoint itself, not
// its imported (packed) form (`splash import`).
export function resolveModel(arg?: string, opts: { format?: Format; anyFormat?: boolean; source?: boolean } = {}): ResolvedModel {
  if (arg === undefined) {
    const spec = findSpec(DEFAULT_MODEL_ID);
    if (!spec) throw new CliError(`the embedded model ${DEFAULT_MODEL_ID} is not part of this build`, "pass a supported model id or a checkpoint directory");
    return resolveEmbedded(spec, opts.source ?? false);
  }
  if (looksLikePath(arg)) return resolveDirectory(arg);
  const spec = findSpec(arg);
  if (spec && isHubSpec(spec)) return resolveHub(spec, opts.format, opts.anyFormat ?? false, opts.source ?? false);
  if (spec) return resolveEmbedded(spec, opts.source ?? false);
  if (existsSync(arg)) return resolveDirectory(arg);
  throw unknownModel(arg);
}

export type EnsureOptions = PullModelOptions & {
  interactive: boolean;
  format?: Format;
  // Asks the user a yes/no question on the terminal; tests pass their own.
  ask?: (question: string) => boolean;
};

function askOnTerminal(question: string): boolean {
  const answer = prompt(`${question} [Y/n]`);
  return answer !== null && /^(y|yes|)$/i.test(answer.trim());
}

// resolveModel for serve/run: a supported model that is not downloaded is pulled after asking on a terminal, and
// is otherwise an error whose hint is the exact `splash pull` command.
export async function ensureModelFiles(arg: string | undefined, opts: EnsureOptions): Promise<ResolvedModel> {
  try {
    return resolveModel(arg, { format: opts.format });
  } catch (e) {
    if (!(e instanceof ModelNotDownloaded) || !opts.interactive) throw e;
    const spec = e.spec;
    const ask = opts.ask ?? askOnTerminal;
    if (!ask(`${e.message}. Download it now?`)) throw e;
    await pullModel(spec, opts.format ?? spec.defaultFormat, opts);
    return resolveModel(arg, { format: opts.format });
  }
}
