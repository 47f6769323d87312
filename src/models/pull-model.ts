// Pulling a supported model (one format, and its DFlash drafter when asked) or any hub repository, with progress on
// stderr; shared by `splash pull` and by serve/run when they offer the download.
import { log } from "../log.ts";
import { formatBytes } from "../format.ts";
import { CliError } from "../cli/_command.ts";
import { configMismatches, describeMismatch, readCheckpointConfig } from "./config.ts";
import { HubClient, HubError } from "./hub/client.ts";
import { pullRepo, type PullOptions, type PullResult } from "./hub/pull.ts";
import { pullProgress } from "./hub/progress.ts";
import { DRAFTER_NAMES, hubDrafter, type Format, type HubModelSpec } from "./spec.ts";

export type PullModelOptions = Pick<PullOptions, "signal" | "freeBytes" | "concurrency" | "retryDelayMs"> & { client?: HubClient; quiet?: boolean };

// A HubError as the CLI prints it: one line and what to do.
function hubCliError(e: unknown, command: string): unknown {
  if (!(e instanceof HubError)) return e;
  if (e.kind === "interrupted") return new CliError("interrupted: the partial download is kept", `run \`${command}\` again to resume it`, 130);
  return new CliError(e.message, e.hint);
}

export async function pullRepository(repo: string, revision: string, label: string, command: string, opts: PullModelOptions = {}): Promise<PullResult> {
  const client = opts.client ?? new HubClient();
  try {
    const r = await pullRepo({ ...opts, client, repo, revision, progress: opts.quiet ? undefined : pullProgress(label) });
    if (!opts.quiet) {
      const what = r.downloaded === 0 ? `all ${r.files.length} files were already here` : `${r.downloaded} files (${formatBytes(r.bytes)}) downloaded, ${r.reused} already here`;
      log.info(`${label}: ${what}\n  ${r.dir}`);
    }
    return r;
  } catch (e) {
    throw hubCliError(e, command);
  }
}

// Pulls `format` of a supported model and checks that its config is the model the spec describes.
export async function pullModel(spec: HubModelSpec, format: Format, opts: PullModelOptions & { drafter?: boolean } = {}): Promise<PullResult> {
  const src = spec.sources[format];
  if (!src) throw new CliError(`${spec.displayName} has no ${format} source`, `available: ${Object.keys(spec.sources).join(", ")}`);
  const command = `splash pull ${spec.id}${format === spec.defaultFormat ? "" : ` --format ${format}`}${opts.drafter ? " --drafter" : ""}`;
  const result = await pullRepository(src.repo, src.revision, `${spec.displayName} ${format} (${src.repo})`, command, opts);
  const mismatches = configMismatches(spec.config, readCheckpointConfig(result.dir));
  if (mismatches.length > 0) {
    throw new CliError(
      `${src.repo} is not the ${spec.displayName} Splash knows: ${mismatches.slice(0, 3).map(describeMismatch).join("; ")}`,
      `the repository changed on the hub; its files are in ${result.dir} and run as a generic checkpoint if you pass that directory`,
    );
  }
  if (opts.drafter) {
    const d = hubDrafter(spec);
    if (!d) throw new CliError(`${spec.displayName} has no separately downloaded drafter`);
    await pullRepository(d.repo.repo, d.repo.revision, `${spec.displayName} ${DRAFTER_NAMES[d.method]} drafter (${d.repo.repo})`, command, opts);
  }
  return result;
}
