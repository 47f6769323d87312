// The CLI command of a launcher: `splash <tool> [MODEL] [--print-config] [-- tool args…]`.
import type { CommandDef } from "citty";
import { CliError, command } from "../cli/_command.ts";
import { launch, printConfig } from "./launch.ts";
import type { Tool } from "./tool.ts";

// Ends `splash` with the tool's own exit code, and no message of Splash's (the tool has said what went wrong).
export class ToolExit extends CliError {
  override name = "ToolExit";
  constructor(code: number) {
    super("", undefined, code);
  }
}

export function launcherCommand(tool: Tool): CommandDef {
  return command({
    meta: {
      name: tool.name,
      description: `Run ${tool.title} on a local model (starts or reuses its server); arguments after -- go to ${tool.binary}`,
    },
    args: {
      model: { type: "positional", required: false, description: "A supported model id, a checkpoint directory, or nothing for the embedded model" },
      printConfig: { type: "boolean", description: `Print the environment, files and command that would be used, without starting anything` },
    },
    passThrough: true,
    async run({ args, rawArgs, passThrough }) {
      // citty also counts words after `--` as positionals: MODEL is only ever one before it.
      const sep = rawArgs.indexOf("--");
      const own = sep >= 0 ? rawArgs.slice(0, sep) : rawArgs;
      const model = own.find((a) => !a.startsWith("-"));
      if (args.printConfig) {
        process.stdout.write(await printConfig(tool, model, passThrough));
        return;
      }
      const code = await launch(tool, model, passThrough);
      if (code !== 0) throw new ToolExit(code);
    },
  }) as CommandDef;
}
