import type { CommandDef, SubCommandsDef } from "citty";
import { root } from "../../src/cli/index.ts";

// Every command and subcommand the root lists, with the words that name it.
export async function everyCommand(): Promise<[string[], CommandDef][]> {
  const out: [string[], CommandDef][] = [];
  const walk = async (cmd: CommandDef, words: string[]) => {
    out.push([words, cmd]);
    const subs = (typeof cmd.subCommands === "function" ? await cmd.subCommands() : await cmd.subCommands) as SubCommandsDef | undefined;
    for (const [name, sub] of Object.entries(subs ?? {})) await walk((typeof sub === "function" ? await sub() : await sub) as CommandDef, [...words, name]);
  };
  await walk(root, ["splash"]);
  return out;
}
