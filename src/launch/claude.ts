// `splash claude`: Claude Code on the Anthropic Messages API. Configured by environment only, with its own config
// directory under the state directory, so the user's ~/.claude (login, settings whose `env` could re-point the base
// URL) stays out of it. What each variable does: agent-clients-and-apis.md §1.
import { join } from "node:path";
import { overridden, userFlag, type LaunchPlan, type Tool, type ToolContext } from "./tool.ts";

export const claude: Tool = {
  name: "claude",
  title: "Claude Code",
  binary: "claude",
  api: "Anthropic Messages",
  endpoint: "/v1/messages",
  install: "npm install -g @anthropic-ai/claude-code",
  otherLocations: (home) => [join(home, ".local", "bin", "claude"), join(home, ".claude", "local", "claude")],
  plan(ctx: ToolContext): LaunchPlan {
    const m = ctx.model;
    const notes: string[] = [];
    const model = userFlag(ctx.args, ["--model"]);
    if (model !== undefined) notes.push(overridden("--model", model, m));
    return {
      env: {
        ANTHROPIC_BASE_URL: ctx.baseUrl, // Claude Code appends /v1/messages itself
        ANTHROPIC_AUTH_TOKEN: ctx.apiKey, // sent as Authorization: Bearer
        ANTHROPIC_API_KEY: "", // a real Anthropic key in the user's environment would be sent instead
        ANTHROPIC_MODEL: m,
        // Every tier and background role maps to the one local model (Haiku also runs titles and summaries).
        ANTHROPIC_DEFAULT_OPUS_MODEL: m,
        ANTHROPIC_DEFAULT_SONNET_MODEL: m,
        ANTHROPIC_DEFAULT_HAIKU_MODEL: m,
        ANTHROPIC_DEFAULT_FABLE_MODEL: m,
        ANTHROPIC_SMALL_FAST_MODEL: m, // the Haiku tier's name in older releases
        CLAUDE_CODE_SUBAGENT_MODEL: m,
        // The attribution block opens the system prompt; on older releases it changed per request and defeated
        // the server's prefix cache.
        CLAUDE_CODE_ATTRIBUTION_HEADER: "0",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1", // no telemetry, update checks or api.anthropic.com lookups
        CLAUDE_CODE_AUTO_COMPACT_WINDOW: String(ctx.contextLength), // compact before the served context is full
        CLAUDE_CODE_MAX_OUTPUT_TOKENS: String(ctx.maxOutputTokens),
        API_TIMEOUT_MS: "3000000", // a long first prompt can take minutes to prefill on a CPU
        CLAUDE_CONFIG_DIR: ctx.home,
      },
      // Onboarding (theme, login method) would otherwise open the first interactive run; the folder-trust question
      // is left to the user.
      files: [{ path: join(ctx.home, ".claude.json"), content: `${JSON.stringify({ hasCompletedOnboarding: true }, null, 2)}\n`, once: true }],
      args: ctx.args,
      notes,
    };
  },
};
