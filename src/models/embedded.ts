// The embedded default model's files. `with { type: "file" }` makes `bun build --compile` carry each file inside
// dist/splash; under `bun run` the same imports are the files' paths in models/splash-tiny/.
//
// Native code mmaps weights, and Bun.mmap/dlopen cannot use /$bunfs paths (bun-stack.md), so inside the binary the
// files are copied once to <cache>/models/splash-tiny-<hash>/ under their real names. The directory name hashes the
// embedded names (Bun puts a content hash in each), so a new build never reuses an old copy; it is written under a
// temporary name and renamed, so two processes starting at once never see a half-written model.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { cacheDir } from "../paths.ts";
import config from "../../models/splash-tiny/config.json" with { type: "file" };
import generationConfig from "../../models/splash-tiny/generation_config.json" with { type: "file" };
import tokenizer from "../../models/splash-tiny/tokenizer.json" with { type: "file" };
import tokenizerConfig from "../../models/splash-tiny/tokenizer_config.json" with { type: "file" };
import chatTemplate from "../../models/splash-tiny/chat_template.jinja" with { type: "file" };
import index from "../../models/splash-tiny/model.safetensors.index.json" with { type: "file" };
import shard1 from "../../models/splash-tiny/model-00001-of-00002.safetensors" with { type: "file" };
import shard2 from "../../models/splash-tiny/model-00002-of-00002.safetensors" with { type: "file" };
import dflashConfig from "../../models/splash-tiny/dflash/config.json" with { type: "file" };
import dflashWeights from "../../models/splash-tiny/dflash/model.safetensors" with { type: "file" };
import dflash2Config from "../../models/splash-tiny/dflash2/config.json" with { type: "file" };
import dflash2Weights from "../../models/splash-tiny/dflash2/model.safetensors" with { type: "file" };

// Real name inside the model directory → path of the embedded (or on-disk) file. JSON imports are typed as their
// content by TypeScript, but `type: "file"` makes every one of them a path string at run time.
export const EMBEDDED_FILES: Record<string, string> = {
  "config.json": config as unknown as string,
  "generation_config.json": generationConfig as unknown as string,
  "tokenizer.json": tokenizer as unknown as string,
  "tokenizer_config.json": tokenizerConfig as unknown as string,
  "chat_template.jinja": chatTemplate,
  "model.safetensors.index.json": index as unknown as string,
  "model-00001-of-00002.safetensors": shard1,
  "model-00002-of-00002.safetensors": shard2,
  "dflash/config.json": dflashConfig as unknown as string,
  "dflash/model.safetensors": dflashWeights,
  "dflash2/config.json": dflash2Config as unknown as string,
  "dflash2/model.safetensors": dflash2Weights,
};

function isEmbedded(path: string): boolean {
  return path.startsWith("/$bunfs/") || /^[A-Z]:\\~BUN\\/.test(path);
}

// The directory holding the embedded model's files under their real names.
export function embeddedModelDir(sourceDir: string, cache = join(cacheDir(), "models")): string {
  const paths = Object.values(EMBEDDED_FILES);
  if (!paths.some(isEmbedded)) return sourceDir;
  const hash = createHash("sha256").update(paths.join("\n")).digest("hex").slice(0, 16);
  const dir = join(cache, `splash-tiny-${hash}`);
  if (existsSync(join(dir, "config.json"))) return dir;
  const tmp = `${dir}.${process.pid}.tmp`;
  rmSync(tmp, { recursive: true, force: true });
  for (const [name, path] of Object.entries(EMBEDDED_FILES)) {
    const target = join(tmp, name);
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, readFileSync(path));
  }
  try {
    renameSync(tmp, dir);
  } catch (e) {
    // Another process finished first: its copy is identical.
    rmSync(tmp, { recursive: true, force: true });
    if (!existsSync(join(dir, "config.json"))) throw e;
  }
  return dir;
}
