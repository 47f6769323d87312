// `splash qwen`: Qwen Code on the OpenAI Chat Completions API (its `openai` auth type). The endpoint goes in the
// environment and on the command line; what has no variable (usage statistics off, the context window) goes in a
// Splash-owned settings file that Qwen Code reads as its system settings, leaving ~/.qwen untouched.
import { join } from "node:path";
import { overridden, userFlag, type LaunchPlan, type Tool, type ToolContext } from "./tool.ts";

export const qwen: Tool = {
  name: "qwen",
  title: "Qwen Code",
  binary: "qwen",
  api: "OpenAI Chat Completions",
  endpoint: "/v1/chat/completions",
  install: "npm install -g @qwen-code/qwen-code",
  plan(ctx: ToolContext): LaunchPlan {
    const settingsPath = join(ctx.home, "settings.json");
    const settings = {
      privacy: { usageStatisticsEnabled: false },
      general: { enableAutoUpdate: false },
      model: { generationConfig: { contextWindowSize: ctx.contextLength } },
    };
    const notes: string[] = [];
    const args: string[] = [];
    const auth = userFlag(ctx.args, ["--auth-type"]);
    if (auth === undefined) args.push("--auth-type", "openai");
    else notes.push(overridden("--auth-type", auth, "openai"));
    const model = userFlag(ctx.args, ["--model", "-m"]);
    if (model === undefined) args.push("--model", ctx.model);
    else notes.push(overridden("--model", model, ctx.model));
    return {
      env: {
        OPENAI_BASE_URL: `${ctx.baseUrl}/v1`,
        OPENAI_API_KEY: ctx.apiKey,
        OPENAI_MODEL: ctx.model,
        QWEN_CODE_MAX_OUTPUT_TOKENS: String(ctx.maxOutputTokens),
        QWEN_CODE_SYSTEM_SETTINGS_PATH: settingsPath,
      },
      files: [{ path: settingsPath, content: `${JSON.stringify(settings, null, 2)}\n` }],
      args: [...args, ...ctx.args],
      notes,
    };
  },
};
