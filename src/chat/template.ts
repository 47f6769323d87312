// A model's own chat template (chat_template.jinja, or tokenizer_config.json's chat_template), rendered with
// @huggingface/jinja as transformers' apply_chat_template renders it with Python jinja2 (trim_blocks, lstrip_blocks,
// Python value printing: see jinja-python.ts). Filters, tests and methods the renderer does not implement are
// found when the template is loaded, so an unusable template fails at load with the construct named, not on the
// first request that reaches that branch.
import { Environment, Template } from "@huggingface/jinja";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { installPythonSemantics } from "./jinja-python.ts";

export class ChatTemplateError extends Error {
  override name = "ChatTemplateError";
}

// The model's template refused a conversation (its own raise_exception, say "No user query found"): a template that
// loaded renders any conversation of the shape it was written for, so this is the request's to fix.
export class TemplateRenderError extends ChatTemplateError {
  override name = "TemplateRenderError";
}

// What a chat template sees: messages in transformers' shape (tool_calls with arguments as objects,
// reasoning_content, content as a string or a list of {type: "text"|"image"} parts), the tools as OpenAI function
// schemas, and the switches the Qwen3.5 templates read.
export type TemplatePart = { type: "text"; text: string } | { type: "image" };
export type TemplateToolCall = { id?: string; type: "function"; function: { name: string; arguments: Record<string, unknown> | string } };
export type TemplateMessage = {
  role: "system" | "user" | "assistant" | "tool";
  content: string | TemplatePart[];
  reasoning_content?: string;
  tool_calls?: TemplateToolCall[];
  tool_call_id?: string;
  name?: string;
};
export type TemplateTool = { type: "function"; function: { name: string; description?: string; parameters: Record<string, unknown> } };
export type TemplateVariables = {
  messages: TemplateMessage[];
  tools?: TemplateTool[];
  add_generation_prompt: boolean;
  enable_thinking?: boolean;
  preserve_thinking?: boolean;
  reasoning_effort?: string;
};

// What @huggingface/jinja 0.5.11 implements (dist/index.js applyFilter, StringValue/ObjectValue builtins).
const FILTERS = new Set([
  "abs", "bool", "capitalize", "default", "dictsort", "first", "float", "indent", "int", "items", "join", "keys", "last",
  "length", "list", "lower", "map", "rejectattr", "replace", "reverse", "safe", "selectattr", "sort", "string", "title",
  "tojson", "trim", "unique", "upper", "values",
]);
const METHODS = new Set([
  "upper", "lower", "strip", "lstrip", "rstrip", "title", "capitalize", "startswith", "endswith", "split", "replace",
  "get", "items", "keys", "values", "dictsort",
]);
const TESTS = new Set((Environment as unknown as { TESTS: Map<string, unknown> }).TESTS.keys());

type Node = { type?: unknown; [key: string]: unknown };

function nameOf(n: unknown): string | undefined {
  const node = n as Node | undefined;
  if (!node) return undefined;
  if (node.type === "Identifier") return node.value as string;
  if (node.type === "CallExpression") return nameOf(node.callee);
  return undefined;
}

// Every construct in the parsed template that the renderer would reject at render time.
function unsupportedConstructs(root: unknown): string[] {
  const found = new Set<string>();
  const walk = (v: unknown) => {
    if (Array.isArray(v)) return v.forEach(walk);
    if (typeof v !== "object" || v === null) return;
    const n = v as Node;
    if (n.type === "FilterExpression" || n.type === "FilterStatement") {
      const f = nameOf(n.filter);
      if (f && !FILTERS.has(f)) found.add(`the filter |${f}`);
    } else if (n.type === "TestExpression") {
      const t = nameOf(n.test);
      if (t && !TESTS.has(t)) found.add(`the test "is ${t}"`);
    } else if (n.type === "CallExpression") {
      const callee = n.callee as Node;
      if (callee?.type === "MemberExpression" && !callee.computed) {
        const m = nameOf(callee.property);
        const obj = nameOf(callee.object);
        if (m && !METHODS.has(m) && obj !== "loop") found.add(`the method .${m}()`);
        if (m && obj === "loop") found.add(`loop.${m}()`);
      }
    }
    for (const [k, x] of Object.entries(n)) if (k !== "type") walk(x);
  };
  walk(root);
  return [...found];
}

export class ChatTemplate {
  private constructor(
    private readonly template: Template,
    readonly source: string,
    private readonly specialTokens: Record<string, string>,
  ) {}

  // Parses and checks a template; `name` says where it came from in error messages.
  static fromSource(source: string, name: string, specialTokens: Record<string, string> = {}): ChatTemplate {
    installPythonSemantics();
    let template: Template;
    try {
      template = new Template(source);
    } catch (e) {
      throw new ChatTemplateError(`${name}: the chat template cannot be parsed: ${(e as Error).message}`);
    }
    const bad = unsupportedConstructs((template as unknown as { parsed: unknown }).parsed);
    if (bad.length) throw new ChatTemplateError(`${name}: the chat template uses ${bad.join(", ")}, which Splash's renderer does not support`);
    return new ChatTemplate(template, source, specialTokens);
  }

  // The template of a model directory: chat_template.jinja, else tokenizer_config.json's chat_template (a string,
  // or a list of named templates, of which "default" is used).
  static load(dir: string): ChatTemplate {
    const configPath = join(dir, "tokenizer_config.json");
    const config = existsSync(configPath) ? (JSON.parse(readFileSync(configPath, "utf8")) as Record<string, unknown>) : {};
    const specialTokens: Record<string, string> = {};
    for (const key of ["bos_token", "eos_token", "pad_token", "unk_token"]) {
      const t = config[key];
      const content = typeof t === "string" ? t : typeof t === "object" && t !== null ? (t as { content?: unknown }).content : undefined;
      if (typeof content === "string") specialTokens[key] = content;
    }
    const jinjaPath = join(dir, "chat_template.jinja");
    if (existsSync(jinjaPath)) return ChatTemplate.fromSource(readFileSync(jinjaPath, "utf8"), jinjaPath, specialTokens);
    let source = config.chat_template;
    if (Array.isArray(source)) {
      source = (source as { name?: unknown; template?: unknown }[]).find((t) => t.name === "default")?.template;
    }
    if (typeof source !== "string") {
      throw new ChatTemplateError(`${dir} has no chat template (chat_template.jinja, or chat_template in tokenizer_config.json)`);
    }
    return ChatTemplate.fromSource(source, configPath, specialTokens);
  }

  render(vars: TemplateVariables): string {
    // transformers passes tools=None and documents=None when there are none, plus the special tokens.
    const items: Record<string, unknown> = { ...this.specialTokens, documents: null, ...vars, tools: vars.tools?.length ? vars.tools : null };
    for (const k of Object.keys(items)) if (items[k] === undefined) delete items[k];
    try {
      return this.template.render(items);
    } catch (e) {
      throw new TemplateRenderError(`the model's chat template cannot render this conversation: ${(e as Error).message}`);
    }
  }
}
