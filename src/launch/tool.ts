// What a launcher module describes for its tool, and the steps every launcher shares: find the executable, write
// the tool's Splash-owned config, show the plan (--print-config), run the tool in the foreground.
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { constants } from "node:os";
import { dirname } from "node:path";
import { CliError } from "../cli/_command.ts";

// Where the server is and what it serves, plus the tool's own directory and the user's arguments (after `--`).
export type ToolContext = {
  baseUrl: string; // http://127.0.0.1:PORT (or a --url server's), no trailing slash, no /v1
  apiKey: string;
  model: string; // the id the server serves
  contextLength: number;
  maxOutputTokens: number;
  home: string; // Splash-owned directory for this tool's config (<state>/launch/<tool>)
  args: string[];
};

// A config file the launcher writes. `once`: written only when absent, because the tool keeps its own state in it.
export type ConfigFile = { path: string; content: string; once?: boolean };

export type LaunchPlan = {
  env: Record<string, string>; // set on top of the user's environment
  files: ConfigFile[];
  args: string[]; // the tool's whole argument list
  notes: string[]; // said to the user before the tool starts (e.g. which of their flags won)
};

export type Tool = {
  name: string; // `splash <name>`
  title: string;
  binary: string;
  api: string; // the wire API it speaks to Splash
  endpoint: "/v1/messages" | "/v1/responses" | "/v1/chat/completions"; // where that API is served
  install: string; // how to install it
  otherLocations?: (home: string) => string[]; // where its installer puts it when that is not on PATH
  plan(ctx: ToolContext): LaunchPlan;
};

// The value of the first of `names` in the user's arguments (`--model x`, `--model=x`, `-m x`); "" when the flag is
// there without a value, undefined when absent.
export function userFlag(args: string[], names: string[]): string | undefined {
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    for (const n of names) {
      if (a === n) return args[i + 1] ?? "";
      if (a.startsWith(`${n}=`)) return a.slice(n.length + 1);
    }
  }
  return undefined;
}

// The note for a user flag that replaces what Splash would set.
export function overridden(flag: string, value: string, ours: string): string {
  return `your ${flag} ${value} is passed as given, instead of Splash's ${ours}`;
}

export function findBinary(tool: Tool, home = process.env.HOME ?? ""): string | undefined {
  return Bun.which(tool.binary) ?? tool.otherLocations?.(home).find((p) => existsSync(p));
}

export function notInstalled(tool: Tool): CliError {
  return new CliError(`${tool.title} is not installed (no \`${tool.binary}\` on PATH)`, `install it with: ${tool.install}`, 2);
}

export function writeFiles(files: ConfigFile[]): void {
  for (const f of files) {
    if (f.once && existsSync(f.path)) continue;
    mkdirSync(dirname(f.path), { recursive: true });
    writeFileSync(f.path, f.content, { mode: 0o600 });
  }
}

const quote = (s: string) => (/^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

// The plan as a shell script: what a user would type to do the same by hand.
export function describePlan(tool: Tool, plan: LaunchPlan, header: string[]): string {
  const lines = header.map((h) => `# ${h}`);
  lines.push("", "# environment (on top of yours)");
  for (const [k, v] of Object.entries(plan.env)) lines.push(`export ${k}=${v === "" ? "''" : quote(v)}`);
  if (plan.files.length) lines.push("", "# files");
  for (const f of plan.files) {
    lines.push(`mkdir -p ${quote(dirname(f.path))}`);
    if (f.once) lines.push(`# written only when absent: ${tool.title} keeps its own state in it`);
    lines.push(`cat > ${quote(f.path)} <<'SPLASH'`, f.content.replace(/\n$/, ""), "SPLASH");
  }
  lines.push("", "# command", [tool.binary, ...plan.args].map(quote).join(" "));
  return `${lines.join("\n")}\n`;
}

// Runs the tool with the terminal attached and returns its exit code (128 + signal number when a signal ended it).
// Ctrl-C reaches the tool from the terminal directly; Splash ignores it meanwhile and passes on a SIGTERM or SIGHUP.
export async function runTool(binary: string, plan: LaunchPlan): Promise<number> {
  const child = Bun.spawn([binary, ...plan.args], { env: { ...process.env, ...plan.env }, stdin: "inherit", stdout: "inherit", stderr: "inherit" });
  const ignore = () => {};
  const forward = (signal: NodeJS.Signals) => child.kill(signal);
  process.on("SIGINT", ignore);
  process.on("SIGTERM", forward);
  process.on("SIGHUP", forward);
  try {
    const code = await child.exited;
    if (child.signalCode) return 128 + (constants.signals[child.signalCode as keyof typeof constants.signals] ?? 0);
    return code;
  } finally {
    process.off("SIGINT", ignore);
    process.off("SIGTERM", forward);
    process.off("SIGHUP", forward);
  }
}
