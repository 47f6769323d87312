// `splash hermes`: Hermes Agent on the OpenAI Chat Completions API through its `custom` provider. HERMES_HOME is a
// Splash-owned directory; its config.yaml gets Splash's `model` section at each launch and keeps everything else
// Hermes or the user put there (toolsets, skills settings).
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { CliError } from "../cli/_command.ts";
import { log } from "../log.ts";
import { overridden, userFlag, type LaunchPlan, type Tool, type ToolContext } from "./tool.ts";

// Hermes refuses to start with a smaller context (agent-clients-and-apis.md §4).
export const HERMES_MIN_CONTEXT = 64000;

const HEADER = "# The `model` section is written by `splash hermes` at each launch; the rest is kept.\n";

function existing(path: string): Record<string, unknown> {
  if (!existsSync(path)) return {};
  try {
    const parsed: unknown = Bun.YAML.parse(readFileSync(path, "utf8"));
    if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
  } catch (e) {
    log.warn(`${path} is not valid YAML (${e instanceof Error ? e.message : e}); writing a fresh one`);
  }
  return {};
}

export const hermes: Tool = {
  name: "hermes",
  title: "Hermes Agent",
  binary: "hermes",
  api: "OpenAI Chat Completions",
  endpoint: "/v1/chat/completions",
  install: "pip install hermes-agent (or its installer: curl -fsSL https://hermes-agent.nousresearch.com/install.sh | bash)",
  otherLocations: (home) => [join(home, ".local", "bin", "hermes"), join(home, ".hermes", "hermes-agent", "venv", "bin", "hermes")],
  plan(ctx: ToolContext): LaunchPlan {
    if (ctx.contextLength < HERMES_MIN_CONTEXT) {
      throw new CliError(
        `Hermes Agent needs a context of at least ${HERMES_MIN_CONTEXT} tokens; the ${ctx.model} server gives ${ctx.contextLength}`,
        "give the server more memory for sequences (`splash stop`, then launch again with more free memory), or use a model with a longer context",
      );
    }
    const path = join(ctx.home, "config.yaml");
    const config = {
      ...existing(path),
      model: { provider: "custom", base_url: `${ctx.baseUrl}/v1`, api_key: ctx.apiKey, default: ctx.model, context_length: ctx.contextLength },
    };
    const notes: string[] = [];
    const model = userFlag(ctx.args, ["--model", "-m"]);
    if (model !== undefined) notes.push(overridden("--model", model, ctx.model));
    const provider = userFlag(ctx.args, ["--provider"]);
    if (provider !== undefined) notes.push(overridden("--provider", provider, "custom"));
    return {
      env: { HERMES_HOME: ctx.home },
      files: [{ path, content: `${HEADER}${Bun.YAML.stringify(config, null, 2)}\n` }],
      args: ctx.args,
      notes,
    };
  },
};
