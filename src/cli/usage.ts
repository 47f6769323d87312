// `--help` text of a command, from what it declares: options under the kebab-case names the parser accepts and
// the README uses (`--api-key`, never `--apiKey`), no padding after the last column, and styles only for a
// terminal that wants them (citty's own renderer colours piped output and writes camelCase names).
import type { ArgDef, ArgsDef, CommandDef, CommandMeta, SubCommandsDef } from "citty";
import { kebab } from "./_command.ts";

// Escape sequences only on a terminal, and never when NO_COLOR is set to anything (no-color.org).
export function wantsColor(stream: { isTTY?: boolean } = process.stdout): boolean {
  return stream.isTTY === true && !process.env.NO_COLOR;
}

type Style = (s: string) => string;
const styles = (color: boolean) => {
  const sgr = (on: number, off: number): Style => (color ? (s) => `\x1b[${on}m${s}\x1b[${off}m` : (s) => s);
  return { bold: sgr(1, 22), cyan: sgr(36, 39), gray: sgr(90, 39) };
};

async function resolve<T>(v: T | (() => T | Promise<T>) | Promise<T>): Promise<T> {
  return typeof v === "function" ? await (v as () => T | Promise<T>)() : await v;
}

// Rows of [label, text] as two columns; the label column is padded, the text is not.
function columns(rows: [string, string][], label: Style): string[] {
  const width = Math.max(...rows.map(([l]) => l.length));
  return rows.map(([l, text]) => (text ? `  ${label(l)}${" ".repeat(width - l.length)}    ${text}` : `  ${label(l)}`));
}

function aliases(def: ArgDef): string[] {
  const a = "alias" in def ? def.alias : undefined;
  return a === undefined ? [] : Array.isArray(a) ? a : [a];
}

function optionRows(args: ArgsDef): [string, string][] {
  const rows: [string, string][] = [];
  for (const [name, def] of Object.entries(args)) {
    if (def.type === "positional") continue;
    const flags = [...aliases(def).map((a) => (a.length === 1 ? `-${a}` : `--${a}`)), `--${kebab(name)}`].join(", ");
    const value = def.type === "boolean" ? "" : def.type === "enum" ? ` <${(def.options ?? []).join("|")}>` : ` <${def.valueHint ?? kebab(name)}>`;
    // A flag that is on unless turned off is shown as the way to turn it off.
    if (def.type === "boolean" && def.default === true) {
      rows.push([`--no-${kebab(name)}`, def.negativeDescription ?? `Turn off: ${def.description ?? name}`]);
      continue;
    }
    const shown = def.default !== undefined && def.type !== "boolean" && !/\(default/i.test(def.description ?? "");
    const text = [def.description ?? "", def.required ? "(required)" : "", shown ? `(default: ${String(def.default)})` : ""].filter(Boolean).join(" ");
    rows.push([flags + value, text]);
  }
  return rows;
}

// `words`: the command line that names cmd ("splash", "bench", "decode").
export async function renderUsage(cmd: CommandDef, words: string[], color = wantsColor()): Promise<string> {
  const s = styles(color);
  const meta = (await resolve(cmd.meta ?? {})) as CommandMeta;
  const args = ((await resolve(cmd.args ?? {})) ?? {}) as ArgsDef;
  const name = words.join(" ");
  const positionals = Object.entries(args).filter(([, d]) => d.type === "positional");
  const options = optionRows(args);
  const subs = cmd.subCommands ? ((await resolve(cmd.subCommands)) as SubCommandsDef) : undefined;

  const usage = [name, options.length ? "[OPTIONS]" : "", ...positionals.map(([n, d]) => (d.required === false || d.default !== undefined ? `[${n.toUpperCase()}]` : n.toUpperCase()))];
  if (subs) usage.push("<command>");
  const out = [meta.description ?? "", "", `${s.bold("Usage:")} ${s.cyan(usage.filter(Boolean).join(" "))}`];
  if (positionals.length) out.push("", s.bold("Arguments:"), ...columns(positionals.map(([n, d]) => [n.toUpperCase(), d.description ?? ""]), s.cyan));
  if (options.length) out.push("", s.bold("Options:"), ...columns(options, s.cyan));
  if (subs) {
    const rows: [string, string][] = [];
    for (const [sub, def] of Object.entries(subs)) {
      const m = (await resolve(((await resolve(def)) as CommandDef).meta ?? {})) as CommandMeta;
      if (!m.hidden) rows.push([sub, m.description ?? ""]);
    }
    out.push("", s.bold("Commands:"), ...columns(rows, s.cyan), "", `Run ${s.cyan(`${name} <command> --help`)} for a command's options.`);
  }
  return out.join("\n");
}
