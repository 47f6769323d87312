// `splash codex`: Codex CLI on the OpenAI Responses API, through a custom provider `splash` (the built-in ids
// openai/ollama/lmstudio cannot be redefined). CODEX_HOME is a Splash-owned directory: its config.toml is written
// once with what does not change (provider kind, analytics and plugin sync off, which stop every outside call seen in
// agent-clients-and-apis.md §10) and then belongs to Codex (it records trusted folders there); what changes per
// launch (port, model, model catalog) goes on the command line as -c overrides.
import { join } from "node:path";
import { overridden, userFlag, type LaunchPlan, type Tool, type ToolContext } from "./tool.ts";

const toml = (s: string) => JSON.stringify(s); // a TOML basic string has JSON's escapes

// Codex's metadata for the model (else it warns and assumes a 272K context); the entry's fields as in Codex's own
// catalog. Empty base instructions: the model gets Codex's tool descriptions and developer message, not its
// ≈17K-character prompt written for OpenAI's models.
function catalog(ctx: ToolContext): string {
  const entry = {
    slug: ctx.model,
    display_name: ctx.model,
    context_window: ctx.contextLength,
    shell_type: "default",
    visibility: "list",
    supported_in_api: true,
    priority: 0,
    truncation_policy: { mode: "bytes", limit: 10000 },
    input_modalities: ["text"],
    base_instructions: "",
    support_verbosity: true,
    default_verbosity: "low",
    supports_parallel_tool_calls: false,
    supports_reasoning_summaries: false,
    supported_reasoning_levels: [],
    experimental_supported_tools: [],
  };
  return `${JSON.stringify({ models: [entry] }, null, 2)}\n`;
}

const CONFIG = `# Written once by \`splash codex\`; the server's address and the model are passed with -c at each launch.
check_for_update_on_startup = false

[model_providers.splash]
name = "Splash"
wire_api = "responses"
env_key = "SPLASH_API_KEY"
# A long prefill on a CPU sends only keep-alives for a while.
stream_idle_timeout_ms = 1800000

[analytics]
enabled = false

[features]
plugins = false
`;

export const codex: Tool = {
  name: "codex",
  title: "Codex CLI",
  binary: "codex",
  api: "OpenAI Responses",
  endpoint: "/v1/responses",
  install: "npm install -g @openai/codex",
  plan(ctx: ToolContext): LaunchPlan {
    const catalogPath = join(ctx.home, "splash-models.json");
    const notes: string[] = [];
    const model = userFlag(ctx.args, ["--model", "-m"]);
    if (model !== undefined) notes.push(overridden("--model", model, ctx.model));
    const overrides = [
      `model=${toml(ctx.model)}`,
      `model_provider="splash"`,
      `model_providers.splash.base_url=${toml(`${ctx.baseUrl}/v1`)}`,
      `model_catalog_json=${toml(catalogPath)}`,
    ];
    return {
      env: { CODEX_HOME: ctx.home, SPLASH_API_KEY: ctx.apiKey },
      files: [
        { path: join(ctx.home, "config.toml"), content: CONFIG, once: true },
        { path: catalogPath, content: catalog(ctx) },
      ],
      // Global flags first; the user's arguments (a subcommand such as `exec`, or their own -c) come after and win.
      args: [...overrides.flatMap((o) => ["-c", o]), ...ctx.args],
      notes,
    };
  },
};
