// The CLI command of a launcher: `splash <tool> [MODEL] [--port N] [--print-config] [-- tool args…]`, or with a
// server elsewhere `splash <tool> --url URL [--api-key KEY] [--model NAME] …`.
import type { ArgsDef, CommandDef } from "citty";
import { CliError, command, intOption, parseOption, UsageError } from "../cli/_command.ts";
import { launch, printConfig, type LaunchTarget } from "./launch.ts";
import type { Tool } from "./tool.ts";

// Ends `splash` with the tool's own exit code, and no message of Splash's (the tool has said what went wrong).
export class ToolExit extends CliError {
  override name = "ToolExit";
  constructor(code: number) {
    super("", undefined, code);
  }
}

// The positional is keyed MODEL (help shows it so) to leave `model` to the --model flag.
const ARGS = {
  MODEL: { type: "positional", required: false, description: "A supported model id, a checkpoint directory, or nothing for the embedded model" },
  port: { type: "string", description: "Port for the server the launcher starts (default: a free one)" },
  url: { type: "string", description: "Use the OpenAI/Anthropic-compatible server at this address instead of a local one (Splash, vLLM, SGLang)" },
  apiKey: { type: "string", description: "The --url server's API key" },
  model: { type: "string", description: "The --url server's model to use (default: the one it serves)" },
  printConfig: { type: "boolean", description: `Print the environment, files and command that would be used, without starting anything` },
} as const satisfies ArgsDef;

// The MODEL positional: the first word before `--` that is neither a flag nor a flag's value (citty also counts
// words after `--` as positionals, and would take `--url X`'s X for MODEL).
function modelPositional(own: string[]): string | undefined {
  const valued = new Set(["--port", "--url", "--api-key", "--apiKey", "--model"]);
  for (let i = 0; i < own.length; i++) {
    const a = own[i]!;
    if (a.startsWith("-")) {
      if (valued.has(a)) i++;
      continue;
    }
    return a;
  }
  return undefined;
}

function target(name: string, own: string[], args: { port?: string; url?: string; apiKey?: string; model?: string }): LaunchTarget {
  const model = modelPositional(own);
  if (args.url === undefined) {
    if (args.apiKey !== undefined || args.model !== undefined) throw new UsageError("--api-key and --model go with --url (a server elsewhere); a local model is named by MODEL", name);
    const port = args.port === undefined ? undefined : parseOption(name, "port", intOption(1, 65535), args.port);
    return { kind: "local", model, port };
  }
  if (model !== undefined) throw new UsageError(`MODEL (${model}) names a local model to serve; with --url give the server's model with --model`, name);
  if (args.port !== undefined) throw new UsageError("--port is for the server a launcher starts; with --url the server runs elsewhere", name);
  if (args.apiKey !== undefined && args.apiKey.trim() === "") throw new UsageError("--api-key is empty: give the server's key, or leave the option out for a server without one", name);
  return { kind: "remote", url: args.url, apiKey: args.apiKey, model: args.model };
}

export function launcherCommand(tool: Tool): CommandDef {
  return command({
    meta: {
      name: tool.name,
      description: `Run ${tool.title} on a local model (starts or reuses its server) or on a server elsewhere (--url); arguments after -- go to ${tool.binary}`,
    },
    args: ARGS,
    passThrough: true,
    async run({ args, rawArgs, passThrough }) {
      const sep = rawArgs.indexOf("--");
      const own = sep >= 0 ? rawArgs.slice(0, sep) : rawArgs;
      const where = target(tool.name, own, args);
      if (args.printConfig) {
        process.stdout.write(await printConfig(tool, where, passThrough));
        return;
      }
      const code = await launch(tool, where, passThrough);
      if (code !== 0) throw new ToolExit(code);
    },
  }) as CommandDef;
}
