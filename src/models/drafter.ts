// Which speculative drafter a loaded model gets (`--draft auto|none|mtp|dflash|dflash2`). MTP is the checkpoint's
// own mtp.* layer; DFlash and DFlash2 are separate drafter directories (the embedded model's dflash/ and dflash2/,
// or a hub model's drafter downloaded with `splash pull MODEL --drafter`).
//
// auto: the drafter whose decode speedup the spec records as measured on the backend the model runs on
// (spec.measuredSpeedup[backend], from `splash bench spec --backend`) is highest, when it is a real gain; without
// measurements on that backend, the spec's declared default; else none.
import { join } from "node:path";
import { CliError } from "../cli/_command.ts";
import type { DrafterOptions } from "../native/model.ts";
import type { ResolvedModel } from "./resolve.ts";
import { DRAFT_METHODS, DRAFTER_NAMES, hubDrafter, type BackendKind, type Drafter } from "./spec.ts";

export const DRAFT_CHOICES = ["auto", ...DRAFT_METHODS] as const;
export type DraftChoice = (typeof DRAFT_CHOICES)[number];

// A measured speedup below this is noise, not a reason to speculate.
const MIN_GAIN = 1.05;

// Where each drafter of this model is, when it is here: MTP when the weights carry mtp.*, a DFlash or DFlash2
// directory beside an embedded model, or a hub model's downloaded drafter.
function available(resolved: ResolvedModel, hasMtp: boolean): Record<Drafter, string | boolean> {
  const have: Record<Drafter, string | boolean> = { mtp: hasMtp, dflash: false, dflash2: false };
  for (const method of ["dflash", "dflash2"] as const) {
    const d = resolved.spec?.draft[method];
    if (resolved.kind === "embedded" && typeof d === "string") have[method] = join(resolved.dir, d);
  }
  if (resolved.kind === "hub") {
    const d = hubDrafter(resolved.spec);
    if (d && resolved.drafterDir) have[d.method] = resolved.drafterDir;
  }
  return have;
}

function options(kind: Drafter, where: string | boolean): DrafterOptions {
  return kind === "mtp" ? { kind } : { kind, dir: where as string };
}

// The backend kind of Model.info.backend ("cpu", "vulkan: NVIDIA H200", "metal: Apple M4").
export function backendKind(runsOn: string): BackendKind {
  return runsOn.split(":")[0] as BackendKind;
}

// backend: what the model runs on. drafterDir: a DFlash or DFlash2 drafter directory given explicitly, for --draft
// dflash or dflash2 (a checkpoint directory has no known place for one).
export function chooseDrafter(resolved: ResolvedModel, choice: DraftChoice, hasMtp: boolean, backend: BackendKind, drafterDir?: string): DrafterOptions | null {
  const have = available(resolved, hasMtp);
  if (choice === "none") return null;
  if (choice !== "auto") {
    const where = choice !== "mtp" && drafterDir ? drafterDir : have[choice];
    if (where) return options(choice, where);
    if (choice === "mtp") throw new CliError(`${resolved.id} has no MTP layer (mtp.* tensors) in ${resolved.dir}`, "use --draft dflash, dflash2 or none");
    const hub = resolved.kind === "hub" ? hubDrafter(resolved.spec) : undefined;
    const pull = hub?.method === choice ? `download it with \`splash pull ${resolved.id} --drafter\`, or ` : "";
    throw new CliError(`${resolved.id} has no ${DRAFTER_NAMES[choice]} drafter here`, `${pull}use --draft mtp or --draft none`);
  }
  const measured = resolved.spec?.measuredSpeedup?.[backend];
  if (measured) {
    const best = (["mtp", "dflash", "dflash2"] as const).filter((k) => have[k] && (measured[k] ?? 0) >= MIN_GAIN).sort((a, b) => measured[b]! - measured[a]!)[0];
    return best ? options(best, have[best]) : null;
  }
  const dflt = resolved.spec?.draft.default;
  return dflt && dflt !== "none" && have[dflt] ? options(dflt, have[dflt]) : null;
}
