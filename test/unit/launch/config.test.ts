// The environment, files and command each launcher produces, against golden files (test/fixtures/launch/<tool>.sh,
// the --print-config form with a fixed port, key and state directory). SPLASH_UPDATE_GOLDEN=1 rewrites them.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { claude } from "../../../src/launch/claude.ts";
import { codex } from "../../../src/launch/codex.ts";
import { hermes } from "../../../src/launch/hermes.ts";
import { opencode } from "../../../src/launch/opencode.ts";
import { qwen } from "../../../src/launch/qwen.ts";
import { describePlan, userFlag, writeFiles, type Tool, type ToolContext } from "../../../src/launch/tool.ts";

const FIXTURES = join(import.meta.dir, "..", "..", "fixtures", "launch");
const TOOLS: Tool[] = [claude, codex, opencode, hermes, qwen];

function context(tool: Tool, o: Partial<ToolContext> = {}): ToolContext {
  return { baseUrl: "http://127.0.0.1:43210", apiKey: "sk-splash-test", model: "splash-tiny", contextLength: 65536, maxOutputTokens: 8192, home: `/STATE/launch/${tool.name}`, args: [], ...o };
}

describe("golden plans", () => {
  for (const tool of TOOLS) {
    test(tool.name, () => {
      const text = describePlan(tool, tool.plan(context(tool, { args: ["-p", "say hi"] })), [`splash ${tool.name}`]);
      const golden = join(FIXTURES, `${tool.name}.sh`);
      if (process.env.SPLASH_UPDATE_GOLDEN === "1") writeFileSync(golden, text);
      expect(text).toBe(readFileSync(golden, "utf8"));
    });
  }
});

describe("what each tool is told", () => {
  test("claude: base URL without /v1, bearer token, no Anthropic key, every tier on the local model", () => {
    const { env, files } = claude.plan(context(claude));
    expect(env.ANTHROPIC_BASE_URL).toBe("http://127.0.0.1:43210");
    expect(env.ANTHROPIC_AUTH_TOKEN).toBe("sk-splash-test");
    expect(env.ANTHROPIC_API_KEY).toBe("");
    for (const k of ["ANTHROPIC_MODEL", "ANTHROPIC_DEFAULT_OPUS_MODEL", "ANTHROPIC_DEFAULT_SONNET_MODEL", "ANTHROPIC_DEFAULT_HAIKU_MODEL", "ANTHROPIC_SMALL_FAST_MODEL", "CLAUDE_CODE_SUBAGENT_MODEL"]) {
      expect(env[k]).toBe("splash-tiny");
    }
    expect(env.CLAUDE_CODE_ATTRIBUTION_HEADER).toBe("0");
    expect(env.CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC).toBe("1");
    expect(env.CLAUDE_CODE_AUTO_COMPACT_WINDOW).toBe("65536");
    expect(env.CLAUDE_CODE_MAX_OUTPUT_TOKENS).toBe("8192");
    expect(JSON.parse(files[0]!.content)).toEqual({ hasCompletedOnboarding: true });
  });

  test("codex: its config parses as TOML with a non-reserved provider on the Responses API, analytics and plugins off", () => {
    const plan = codex.plan(context(codex));
    const config = Bun.TOML.parse(plan.files.find((f) => f.path.endsWith("config.toml"))!.content) as Record<string, any>;
    expect(config.model_providers.splash).toEqual({ name: "Splash", wire_api: "responses", env_key: "SPLASH_API_KEY", stream_idle_timeout_ms: 1800000 });
    expect(config.analytics.enabled).toBe(false);
    expect(config.features.plugins).toBe(false);
    // Each -c value is TOML too: parse them as one document.
    const overrides = Bun.TOML.parse(plan.args.filter((_, i) => plan.args[i - 1] === "-c").join("\n")) as Record<string, any>;
    expect(overrides.model_provider).toBe("splash");
    expect(["openai", "ollama", "lmstudio", "amazon-bedrock"]).not.toContain(overrides.model_provider);
    expect(overrides.model_providers.splash.base_url).toBe("http://127.0.0.1:43210/v1");
    expect(overrides.model).toBe("splash-tiny");
    const catalog = JSON.parse(plan.files.find((f) => f.path === overrides.model_catalog_json)!.content);
    expect(catalog.models[0]).toMatchObject({ slug: "splash-tiny", context_window: 65536 });
    expect(plan.env).toEqual({ CODEX_HOME: "/STATE/launch/codex", SPLASH_API_KEY: "sk-splash-test" });
  });

  test("opencode: the provider, model and limits in OPENCODE_CONFIG_CONTENT; no models.dev fetch, no autoupdate", () => {
    const { env } = opencode.plan(context(opencode));
    const config = JSON.parse(env.OPENCODE_CONFIG_CONTENT!);
    expect(config.provider.splash.options.baseURL).toBe("http://127.0.0.1:43210/v1");
    expect(config.provider.splash.models["splash-tiny"].limit).toEqual({ context: 65536, output: 8192 });
    expect(config.model).toBe("splash/splash-tiny");
    expect(env.SPLASH_API_KEY).toBe("sk-splash-test");
    expect(env.OPENCODE_DISABLE_MODELS_FETCH).toBe("1");
    expect(env.OPENCODE_DISABLE_AUTOUPDATE).toBe("1");
  });

  test("hermes: custom provider with the served context; refuses a context under 64000", () => {
    const { env, files } = hermes.plan(context(hermes));
    expect(env.HERMES_HOME).toBe("/STATE/launch/hermes");
    const config = Bun.YAML.parse(files[0]!.content) as Record<string, any>;
    expect(config.model).toEqual({ provider: "custom", base_url: "http://127.0.0.1:43210/v1", api_key: "sk-splash-test", default: "splash-tiny", context_length: 65536 });
    expect(() => hermes.plan(context(hermes, { contextLength: 32768 }))).toThrow(/at least 64000 tokens/);
  });

  test("hermes: keeps what Hermes or the user added to its config.yaml", () => {
    const home = mkdtempSync(join(tmpdir(), "splash-hermes-"));
    writeFileSync(join(home, "config.yaml"), "model:\n  default: old\n  provider: openrouter\ntoolsets:\n  - terminal\n  - file\n");
    const plan = hermes.plan(context(hermes, { home }));
    writeFiles(plan.files);
    const config = Bun.YAML.parse(readFileSync(join(home, "config.yaml"), "utf8")) as Record<string, any>;
    expect(config.toolsets).toEqual(["terminal", "file"]);
    expect(config.model.provider).toBe("custom");
    expect(config.model.default).toBe("splash-tiny");
  });

  test("qwen: OpenAI env, --auth-type openai --model, and system settings with the context window", () => {
    const { env, args, files } = qwen.plan(context(qwen, { args: ["-p", "hi"] }));
    expect(env).toMatchObject({ OPENAI_BASE_URL: "http://127.0.0.1:43210/v1", OPENAI_API_KEY: "sk-splash-test", OPENAI_MODEL: "splash-tiny" });
    expect(args).toEqual(["--auth-type", "openai", "--model", "splash-tiny", "-p", "hi"]);
    expect(files[0]!.path).toBe(env.QWEN_CODE_SYSTEM_SETTINGS_PATH!);
    expect(JSON.parse(files[0]!.content)).toMatchObject({ privacy: { usageStatisticsEnabled: false }, model: { generationConfig: { contextWindowSize: 65536 } } });
  });
});

describe("a user's flag that conflicts wins, and they are told", () => {
  test.each([
    [claude, ["--model", "other"]],
    [codex, ["-m", "other"]],
    [opencode, ["--model=splash/other"]],
    [hermes, ["-m", "other"]],
    [qwen, ["--model", "other"]],
  ] as const)("%#", (tool, args) => {
    const plan = tool.plan(context(tool, { args: [...args] }));
    expect(plan.notes.join("\n")).toMatch(/instead of Splash's/);
    expect(plan.args.slice(-args.length)).toEqual([...args]);
    expect(plan.args.filter((a) => a === "--model" || a === "-m").length).toBeLessThanOrEqual(1);
  });

  test("userFlag reads --flag value, --flag=value and short forms", () => {
    expect(userFlag(["-p", "x", "--model", "a"], ["--model", "-m"])).toBe("a");
    expect(userFlag(["--model=b"], ["--model"])).toBe("b");
    expect(userFlag(["-m", "c"], ["--model", "-m"])).toBe("c");
    expect(userFlag(["--models", "d"], ["--model"])).toBeUndefined();
  });
});

test("files marked once are not overwritten", () => {
  const home = mkdtempSync(join(tmpdir(), "splash-once-"));
  const path = join(home, "a", ".claude.json");
  writeFiles([{ path, content: "first\n", once: true }]);
  writeFiles([{ path, content: "second\n", once: true }]);
  expect(readFileSync(path, "utf8")).toBe("first\n");
});
