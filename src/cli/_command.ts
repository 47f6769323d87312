// How every Splash command is declared and how its arguments are checked.
//
// citty 0.2.2 accepts unknown flags silently (`--prot 9000` becomes `prot: true` plus a stray positional), so each
// command is wrapped with a strict check of the raw arguments against what it declares (bun-stack.md). Values are
// then parsed by the command's zod schema, which is the single source of truth for what a value may be.
import { defineCommand, type ArgsDef, type CommandDef, type CommandMeta, type ParsedArgs } from "citty";
import { z } from "zod";

// A failure the user can fix: printed as one line plus a hint, never a stack trace.
export class CliError extends Error {
  override name = "CliError";
  constructor(
    message: string,
    readonly hint?: string,
    readonly exitCode = 1,
  ) {
    super(message);
  }
}

// A wrong command line: exit code 2, with the command's --help as the hint.
export class UsageError extends CliError {
  constructor(message: string, command: string) {
    super(message, `run \`splash ${command} --help\` for what it accepts`, 2);
  }
}

type SplashCommand<A extends ArgsDef> = {
  meta: CommandMeta & { name: string; description: string };
  args?: A;
  // Positionals after the declared ones are an error unless the command takes the rest (e.g. a prompt's words).
  restPositionals?: boolean;
  // Arguments after `--` are passed through untouched (launchers forward them to the tool).
  passThrough?: boolean;
  run: (ctx: { args: ParsedArgs<A>; rawArgs: string[]; rest: string[]; passThrough: string[] }) => Promise<void> | void;
};

// An option's name on the command line: args are declared in camelCase (citty hands them to `run` that way), users
// type and read kebab-case (`apiKey` is `--api-key`).
export function kebab(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}

// Every spelling the parser accepts for each option (citty also takes the camelCase one), and which it shows.
function flagNames(args: ArgsDef): Map<string, { name: string; type: string; shown: boolean }> {
  const names = new Map<string, { name: string; type: string; shown: boolean }>();
  for (const [name, def] of Object.entries(args)) {
    if (def.type === "positional") continue;
    const type = def.type ?? "string";
    names.set(name, { name, type, shown: false });
    names.set(kebab(name), { name, type, shown: true });
    if (type === "boolean") for (const n of new Set([name, kebab(name)])) names.set(`no-${n}`, { name, type, shown: false });
    const alias = "alias" in def ? def.alias : undefined;
    const aliases = alias === undefined ? [] : Array.isArray(alias) ? alias : [alias];
    for (const a of aliases) names.set(a, { name, type, shown: true });
  }
  return names;
}

// Throws UsageError for an unknown flag, a string flag without a value, or too many positionals.
export function checkArgs(command: string, args: ArgsDef, rawArgs: string[], restPositionals = false): void {
  const flags = flagNames(args);
  const declaredPositionals = Object.values(args).filter((d) => d.type === "positional").length;
  let positionals = 0;
  for (let i = 0; i < rawArgs.length; i++) {
    const a = rawArgs[i]!;
    if (a === "--") break;
    if (a.startsWith("-") && a !== "-" && !/^-\d/.test(a)) {
      const body = a.replace(/^--?/, "");
      const [key, inline] = body.split("=", 2) as [string, string | undefined];
      const flag = flags.get(key);
      if (!flag) {
        const known = [...flags].filter(([, f]) => f.shown).map(([k]) => (k.length === 1 ? `-${k}` : `--${k}`));
        throw new UsageError(`unknown option ${a.split("=")[0]}${known.length ? ` (accepted: ${known.join(", ")})` : ""}`, command);
      }
      if (flag.type !== "boolean" && inline === undefined) {
        const next = rawArgs[i + 1];
        if (next === undefined || (next.startsWith("--") && next.length > 2)) throw new UsageError(`option ${a} needs a value`, command);
        i++;
      }
      continue;
    }
    positionals++;
  }
  if (!restPositionals && positionals > declaredPositionals) {
    throw new UsageError(`too many arguments (this command takes ${declaredPositionals})`, command);
  }
}

export function command<A extends ArgsDef>(spec: SplashCommand<A>): CommandDef<A> {
  const args = (spec.args ?? {}) as A;
  return defineCommand<A>({
    meta: spec.meta,
    args,
    async run({ args: parsed, rawArgs }) {
      checkArgs(spec.meta.name, args, rawArgs, spec.restPositionals);
      const sep = rawArgs.indexOf("--");
      const passThrough = spec.passThrough && sep >= 0 ? rawArgs.slice(sep + 1) : [];
      const declared = Object.entries(args).filter(([, d]) => d.type === "positional").length;
      const rest = (parsed._ as string[]).slice(declared).filter((x) => !passThrough.includes(x));
      await spec.run({ args: parsed, rawArgs, rest, passThrough });
    },
  });
}

// Parses one option value with a zod schema; a failure names the option and what it accepts.
export function parseOption<T>(command: string, option: string, schema: z.ZodType<T>, value: unknown): T {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  throw new UsageError(`--${option} ${JSON.stringify(value)}: ${issue?.message ?? "invalid value"}`, command);
}

// Common value schemas for options.
export const intOption = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  z.coerce
    .number({ error: "expected an integer" })
    .int({ error: "expected an integer" })
    .min(min, { error: `expected an integer ≥ ${min}` })
    .max(max, { error: `expected an integer ≤ ${max}` });

export const floatOption = (min: number, max: number) =>
  z.coerce
    .number({ error: "expected a number" })
    .min(min, { error: `expected a number in [${min}, ${max}]` })
    .max(max, { error: `expected a number in [${min}, ${max}]` });

const SIZE_UNITS: Record<string, number> = { "": 1, b: 1, k: 2 ** 10, kb: 2 ** 10, kib: 2 ** 10, m: 2 ** 20, mb: 2 ** 20, mib: 2 ** 20, g: 2 ** 30, gb: 2 ** 30, gib: 2 ** 30, t: 2 ** 40, tb: 2 ** 40, tib: 2 ** 40 };

// A byte size such as 512M, 8G, 8GiB or 1073741824 (binary units).
export const sizeOption = z.string().transform((s, ctx) => {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$/.exec(s);
  const unit = m ? SIZE_UNITS[m[2]!.toLowerCase()] : undefined;
  if (!m || unit === undefined) {
    ctx.addIssue({ code: "custom", message: "expected a size such as 512M, 8G or 8GiB" });
    return z.NEVER;
  }
  return Math.floor(Number(m[1]) * unit);
});
