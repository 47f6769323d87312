// `splash models`: the supported models, their sizes per format, and what is on this machine (and where).
import { readdirSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { formatBytes } from "../format.ts";
import { installedDrafter, installedFormats, type Installed } from "../models/installed.ts";
import { allSpecs, DEFAULT_MODEL_ID } from "../models/registry.ts";
import { resolveModel } from "../models/resolve.ts";
import { FORMATS, hubDrafter, isHubSpec, type ModelSpec } from "../models/spec.ts";
import { CliError, command } from "./_command.ts";

function dirBytes(dir: string): number {
  try {
    return readdirSync(dir).reduce((a, name) => {
      const s = statSync(join(dir, name));
      return a + (s.isDirectory() ? dirBytes(join(dir, name)) : s.size);
    }, 0);
  } catch {
    return 0;
  }
}

function home(path: string): string {
  const h = process.env.HOME || homedir();
  return path.startsWith(h + "/") ? `~${path.slice(h.length)}` : path;
}

type Row = { format: string; repo: string; status?: string; gated?: boolean; size: number; installed: Installed | null };

// The directory `splash serve MODEL` loads (an imported packed copy first, the embedded model's files where the
// binary extracted them), or null where it would refuse (not downloaded, partial, not the expected files).
function loadsFrom(spec: ModelSpec): string | null {
  try {
    return resolveModel(spec.id).dir;
  } catch (e) {
    if (e instanceof CliError) return null;
    throw e;
  }
}

function rows(spec: ModelSpec): Row[] {
  if (!isHubSpec(spec)) {
    const dir = resolveModel(spec.id, { source: true }).dir;
    const bytes = dirBytes(dir);
    return [{ format: "embedded", repo: "-", size: bytes, installed: { repo: "-", commit: "-", dir, complete: bytes > 0, bytes } }];
  }
  const installed = installedFormats(spec);
  const out: Row[] = FORMATS.flatMap((f) => {
    const src = spec.sources[f];
    return src ? [{ format: f, repo: src.repo, status: src.status, gated: src.gated, size: spec.memory?.download[f] ?? 0, installed: installed[f] ?? null }] : [];
  });
  const d = hubDrafter(spec);
  if (d) out.push({ format: d.method, repo: d.repo.repo, status: d.repo.status, gated: d.repo.gated, size: spec.memory?.download[d.method] ?? 0, installed: installedDrafter(spec) ?? null });
  return out;
}

function installedText(r: Row): string {
  if (r.format === "embedded") return r.installed?.complete ? "built in" : "missing from this build";
  if (!r.installed) return "-";
  if (!r.installed.complete) return `partial: ${r.installed.problem} (${home(r.installed.dir)})`;
  return `${formatBytes(r.installed.bytes)} in ${home(r.installed.dir)}`;
}

export default command({
  meta: { name: "models", description: "List the supported models, their sizes per format, and what is downloaded" },
  args: { json: { type: "boolean", description: "Print the list as JSON" } },
  run({ args }) {
    // The embedded default first: it is what every command uses without MODEL.
    const specs = [...allSpecs()].sort((a, b) => Number(b.id === DEFAULT_MODEL_ID) - Number(a.id === DEFAULT_MODEL_ID));
    if (args.json) {
      const list = specs.map((s) => ({
        id: s.id,
        displayName: s.displayName ?? s.id,
        architecture: s.architecture,
        contextLength: s.contextLength,
        default: s.id === DEFAULT_MODEL_ID,
        defaultFormat: isHubSpec(s) ? s.defaultFormat : "embedded",
        defaultQuantization: s.quantization?.default ?? null,
        loadsFrom: loadsFrom(s),
        files: rows(s).map((r) => ({ format: r.format, repo: r.repo, repoStatus: r.status ?? null, gated: r.gated ?? false, bytes: r.size, installed: r.installed })),
        fixedBytes: s.memory?.fixed ?? null,
      }));
      console.log(JSON.stringify(list, null, 2));
      return;
    }
    const table: string[][] = [["MODEL", "FORMAT", "REPOSITORY", "SIZE", "INSTALLED"]];
    for (const s of specs) {
      rows(s).forEach((r, i) => {
        const name = i === 0 ? s.id : i === 1 ? `  ${s.displayName ?? ""}` : "";
        const repo = r.repo === "-" ? "-" : `${r.repo}${r.gated ? " (gated)" : ""}${r.status === "assumed" ? " (unconfirmed)" : ""}`;
        table.push([name, r.format, repo, r.size ? formatBytes(r.size) : "-", installedText(r)]);
      });
    }
    const widths = table[0]!.map((_, c) => Math.max(...table.map((row) => row[c]!.length)));
    console.log(table.map((row) => row.map((cell, c) => (c === row.length - 1 ? cell : cell.padEnd(widths[c]!))).join("  ")).join("\n"));
    console.log(`\nSizes are the download per format (computed from the tensor shapes). \`splash pull MODEL [--format F] [--drafter]\` downloads one.`);
  },
});
