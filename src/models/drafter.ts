// Which speculative drafter a loaded model gets (`--draft auto|none|mtp|dflash`). MTP is the checkpoint's own
// mtp.* layer; DFlash is a separate drafter directory (the embedded model's dflash/, or a hub model's drafter
// downloaded with `splash pull MODEL --drafter`).
//
// auto: the drafter whose decode speedup the spec records as measured (spec.measuredSpeedup, from `splash bench
// spec`) is highest, when it is a real gain; without measurements, the spec's declared default; else none.
import { join } from "node:path";
import { CliError } from "../cli/_command.ts";
import type { DrafterOptions } from "../native/model.ts";
import type { ResolvedModel } from "./resolve.ts";
import type { ModelSpec } from "./spec.ts";

export const DRAFT_CHOICES = ["auto", "none", "mtp", "dflash"] as const;
export type DraftChoice = (typeof DRAFT_CHOICES)[number];

// A measured speedup below this is noise, not a reason to speculate.
const MIN_GAIN = 1.05;

// The drafters this model can have: MTP when the weights carry mtp.*, DFlash when a v1 drafter directory is there
// (DFlash2 drafters are refused at load with their own message; auto never picks them).
function available(resolved: ResolvedModel, hasMtp: boolean, drafterDir?: string): { mtp: boolean; dflash: string | undefined; dflash2: boolean } {
  const spec: ModelSpec | undefined = resolved.spec;
  const d = spec?.draft.dflash;
  let dir = drafterDir;
  if (!dir && resolved.kind === "embedded" && typeof d === "string") dir = join(resolved.dir, d);
  if (!dir && resolved.kind === "hub") dir = resolved.drafterDir;
  return { mtp: hasMtp, dflash: dir, dflash2: !drafterDir && typeof d === "object" && d.version === 2 };
}

// drafterDir: a DFlash drafter directory given explicitly (a checkpoint directory has no known place for one).
export function chooseDrafter(resolved: ResolvedModel, choice: DraftChoice, hasMtp: boolean, drafterDir?: string): DrafterOptions | null {
  const have = available(resolved, hasMtp, drafterDir);
  if (choice === "none") return null;
  if (choice === "mtp") {
    if (!have.mtp) throw new CliError(`${resolved.id} has no MTP layer (mtp.* tensors) in ${resolved.dir}`, "use --draft dflash or --draft none");
    return { kind: "mtp" };
  }
  if (choice === "dflash") {
    if (!have.dflash) {
      const pull = resolved.kind === "hub" ? `download it with \`splash pull ${resolved.id} --drafter\`, or ` : "";
      throw new CliError(`${resolved.id} has no DFlash drafter here`, `${pull}use --draft mtp or --draft none`);
    }
    return { kind: "dflash", dir: have.dflash };
  }
  const usable = (k: "mtp" | "dflash") => (k === "mtp" ? have.mtp : have.dflash !== undefined && !have.dflash2);
  const of = (k: "mtp" | "dflash"): DrafterOptions => (k === "mtp" ? { kind: "mtp" } : { kind: "dflash", dir: have.dflash! });
  const measured = resolved.spec?.measuredSpeedup;
  if (measured) {
    const best = (["mtp", "dflash"] as const).filter((k) => usable(k) && (measured[k] ?? 0) >= MIN_GAIN).sort((a, b) => measured[b]! - measured[a]!)[0];
    return best ? of(best) : null;
  }
  const dflt = resolved.spec?.draft.default;
  return dflt && dflt !== "none" && usable(dflt) ? of(dflt) : null;
}
