// `splash opencode`: OpenCode on the OpenAI Chat Completions API through its bundled openai-compatible provider.
// The whole configuration travels in OPENCODE_CONFIG_CONTENT (merged over the user's files, which stay untouched).
import { overridden, userFlag, type LaunchPlan, type Tool, type ToolContext } from "./tool.ts";

export const opencode: Tool = {
  name: "opencode",
  title: "OpenCode",
  binary: "opencode",
  api: "OpenAI Chat Completions",
  endpoint: "/v1/chat/completions",
  install: "npm install -g opencode-ai",
  otherLocations: (home) => [`${home}/.opencode/bin/opencode`],
  plan(ctx: ToolContext): LaunchPlan {
    const ref = `splash/${ctx.model}`;
    const config = {
      $schema: "https://opencode.ai/config.json",
      provider: {
        splash: {
          npm: "@ai-sdk/openai-compatible", // bundled in OpenCode: nothing is installed at run time
          name: "Splash",
          options: { baseURL: `${ctx.baseUrl}/v1`, apiKey: "{env:SPLASH_API_KEY}", timeout: 3000000 },
          models: { [ctx.model]: { name: ctx.model, tool_call: true, limit: { context: ctx.contextLength, output: ctx.maxOutputTokens } } },
        },
      },
      model: ref,
      small_model: ref, // titles and summaries too
    };
    const notes: string[] = [];
    const model = userFlag(ctx.args, ["--model", "-m"]);
    if (model !== undefined) notes.push(overridden("--model", model, ref));
    return {
      env: {
        OPENCODE_CONFIG_CONTENT: JSON.stringify(config),
        SPLASH_API_KEY: ctx.apiKey,
        OPENCODE_DISABLE_MODELS_FETCH: "1", // models.dev is not needed: the limits are in the config
        OPENCODE_DISABLE_AUTOUPDATE: "1",
      },
      files: [],
      args: ctx.args,
      notes,
    };
  },
};
