// The root command: the list of subcommands (each lazily imported, so `splash --help` and the launchers start
// without loading the engine), and the runner that turns errors into one-line messages and exit codes.
import { defineCommand, runCommand, type CommandDef, type SubCommandsDef } from "citty";
import { log } from "../log.ts";
import { CliError } from "./_command.ts";
import { NativeError } from "../native/errors.ts";
import { renderUsage } from "./usage.ts";
import type { Tool } from "../launch/tool.ts";
import pkg from "../../package.json" with { type: "json" };

// An agent launcher's command: the shared `splash <tool> [MODEL] [--url …] [-- args…]` over what is the tool's own
// (src/launch/<tool>.ts: its environment, config files and flags).
const launcher = (tool: () => Promise<Tool>) => async () => (await import("../launch/command.ts")).launcherCommand(await tool());

const subCommands: SubCommandsDef = {
  bench: () => import("./bench.ts").then((m) => m.default),
  doctor: () => import("./doctor.ts").then((m) => m.default),
  logits: () => import("./logits.ts").then((m) => m.default),
  "export-gguf": () => import("./export-gguf.ts").then((m) => m.default),
  tokenize: () => import("./tokenize.ts").then((m) => m.default),
  models: () => import("./models.ts").then((m) => m.default),
  pull: () => import("./pull.ts").then((m) => m.default),
  import: () => import("./import.ts").then((m) => m.default),
  verify: () => import("./verify.ts").then((m) => m.default),
  serve: () => import("./serve.ts").then((m) => m.default),
  run: () => import("./run.ts").then((m) => m.default),
  claude: launcher(() => import("../launch/claude.ts").then((m) => m.claude)),
  codex: launcher(() => import("../launch/codex.ts").then((m) => m.codex)),
  opencode: launcher(() => import("../launch/opencode.ts").then((m) => m.opencode)),
  hermes: launcher(() => import("../launch/hermes.ts").then((m) => m.hermes)),
  qwen: launcher(() => import("../launch/qwen.ts").then((m) => m.qwen)),
  stop: () => import("./stop.ts").then((m) => m.default),
  version: () => import("./version.ts").then((m) => m.default),
};

export const root = defineCommand({
  meta: { name: "splash", version: pkg.version, description: "Local LLM inference for coding agents" },
  subCommands,
});

// The deepest command the leading words name (`bench decode --help` is decode's help), and the words that name it.
async function helpTarget(rawArgs: string[]): Promise<[CommandDef, string[]]> {
  let cmd: CommandDef = root;
  const words = ["splash"];
  for (const word of rawArgs) {
    if (word.startsWith("-")) break;
    const subs = (typeof cmd.subCommands === "function" ? await cmd.subCommands() : await cmd.subCommands) as SubCommandsDef | undefined;
    const sub = subs?.[word];
    if (!sub) break;
    cmd = (typeof sub === "function" ? await sub() : await sub) as CommandDef;
    words.push(word);
  }
  return [cmd, words];
}

function stripAnsi(s: string): string {
  return s.replace(/\x1b\[[0-9;]*m/g, "");
}

// Runs the CLI and returns the process exit code: 0 ok, 1 failure, 2 wrong usage.
export async function main(rawArgs: string[]): Promise<number> {
  const own = rawArgs.includes("--") ? rawArgs.slice(0, rawArgs.indexOf("--")) : rawArgs;
  try {
    if (own.includes("--help") || own.includes("-h") || rawArgs.length === 0) {
      const [cmd, words] = await helpTarget(own);
      console.log(await renderUsage(cmd, words));
      return 0;
    }
    const version = rawArgs.length === 1 && (rawArgs[0] === "--version" || rawArgs[0] === "-v");
    await runCommand(root, { rawArgs: version ? ["version"] : rawArgs });
    return 0;
  } catch (e) {
    if (e instanceof CliError) {
      // An empty message: the command has said everything already (a launched tool's own exit code).
      if (e.message) log.error(e.message);
      if (e.hint) process.stderr.write(`  ${e.hint}\n`);
      return e.exitCode;
    }
    // citty's own usage errors (unknown command, bad enum value, missing positional); its class is not exported.
    if (e instanceof Error && e.name === "CLIError") {
      const code = (e as Error & { code?: string }).code;
      const cmd = code === "E_UNKNOWN_COMMAND" ? "" : `${own.find((a) => !a.startsWith("-")) ?? ""} `;
      log.error(stripAnsi(e.message).replace(/\.$/, ""));
      process.stderr.write(`  run \`splash ${cmd}--help\` for what it accepts\n`);
      return 2;
    }
    // libsplash's message already says where and why (file:line, the fix where there is one); its JS stack adds nothing.
    if (e instanceof NativeError) {
      log.error(e.message);
      return 1;
    }
    log.error(e);
    return 1;
  }
}
