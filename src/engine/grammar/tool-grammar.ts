// Tool calls in the Qwen XML format, as the chat template renders them (qwen35-architecture.md §3):
//
//   <tool_call>\n<function=NAME>\n<parameter=ARG>\nVALUE\n</parameter>\n…</function>\n</tool_call>
//
// several calls joined by "\n". Parameters come in the schema's declared order, required ones always. A parameter
// whose schema admits only strings is raw text; any other is JSON (json.dumps style, what tojson renders), which
// never holds a raw newline. So a parser finds each value's end at the first "\n</parameter>\n". Raw text never
// contains "</parameter>" (each excluded tag costs xgrammar compile time per character over the whole vocabulary,
// so the other tags are not excluded); raw text under a pattern or format never contains "<".
import { alt, lit, type Rules } from "./ebnf.ts";
import { cat, JsonWriter } from "./json-grammar.ts";
import { regexToEbnf } from "./regex.ts";
import { SchemaError, type CompiledSchema, type Node } from "./schema.ts";
import { watchedText } from "./text-grammar.ts";

export type ToolSchema = { name: string; schema: CompiledSchema };

// A parameter schema that JSON could hold but raw text cannot (SchemaError of the tool's parameters schema).
export class ToolParameterError extends SchemaError {
  override name = "ToolParameterError";
  constructor(
    readonly tool: string,
    reason: string,
    path: string,
    keyword?: string,
  ) {
    super(reason, path, keyword);
  }
}

const VALUE_END = "\n</parameter>\n";

// EBNF for one or more tool calls (one, unless `parallel`), each to one of `tools`. The first "<tool_call>" is left
// out when `opened` (the caller's text automaton has just matched it).
export function toolCalls(rules: Rules, tools: ToolSchema[], parallel: boolean, opened = false): string {
  const fns = tools.map((t) => fn(rules, t));
  const body = rules.add("tool_call_body", `"\\n" ${alt(fns)} "</tool_call>"`);
  const more = parallel ? ` ("\\n<tool_call>" ${body})*` : "";
  return rules.add("tool_calls", `${opened ? "" : '"<tool_call>" '}${body}${more}`);
}

function fn(rules: Rules, tool: ToolSchema): string {
  const writer = new JsonWriter(rules, tool.schema);
  const root = resolve(tool.schema.root, tool.schema);
  if (root.kind !== "object") throw new Error(`tool ${tool.name}: parameters must be an object schema`);
  const params = root.properties.map((p) => {
    let value: string;
    try {
      value = stringOnly(p.node, tool.schema) ? rawValue(rules, resolve(p.node, tool.schema), tool.schema) : cat(writer.value(p.node), lit(VALUE_END));
    } catch (e) {
      if (e instanceof SchemaError) throw new ToolParameterError(tool.name, e.reason, `/properties/${p.name}`, e.keyword);
      throw e;
    }
    const param = rules.add(`param_${p.name}`, cat(lit(`<parameter=${p.name}>\n`), value));
    return p.required ? param : `${param}?`;
  });
  return rules.add(`function_${tool.name}`, cat(lit(`<function=${tool.name}>\n`), ...params, lit("</function>\n")));
}

const resolve = (node: Node, schema: CompiledSchema): Node => (node.kind === "ref" ? resolve(schema.defs.get(node.id)!, schema) : node);

// True when every value the node admits is a string (the template writes those raw).
export function stringOnly(node: Node, schema: CompiledSchema, depth = 0): boolean {
  const n = resolve(node, schema);
  if (depth > 64) return false;
  if (n.kind === "string") return true;
  if (n.kind === "values") return n.values.every((v) => typeof v === "string");
  if (n.kind === "union") return n.options.every((o) => stringOnly(o, schema, depth + 1));
  return false;
}

// A raw string value and the closing tag.
function rawValue(rules: Rules, node: Node, schema: CompiledSchema): string {
  const end = lit(VALUE_END);
  const n = resolve(node, schema);
  if (n.kind === "values") return cat(alt((n.values as string[]).map((v) => lit(v))), end);
  if (n.kind === "union") return alt(n.options.map((o) => rawValue(rules, o, schema)));
  if (n.kind !== "string") throw new Error("rawValue: not a string schema");
  if (n.regex) {
    const body = regexToEbnf(n.regex, "raw");
    if (body === null) throw new SchemaError("pattern: a raw tool parameter cannot hold its matches (they need \"<\" or large non-ASCII ranges)", "", "pattern");
    return cat(rules.add("raw_pattern", body), end);
  }
  // Text without "</parameter>", then the closing tag: the text may end anywhere, the tag after it is literal. Length
  // bounds are counted by the constraint (bounds.ts).
  let text = rules.builtins.get("raw_text");
  if (!text) {
    text = watchedText(rules, "raw_text", [{ text: "</parameter>", then: null }], end);
    rules.builtins.set("raw_text", text);
  }
  return text;
}

// Free text up to an optional first tool call: text never holds "<tool_call>" except to start the calls.
export function textThenToolCalls(rules: Rules, tools: ToolSchema[], parallel: boolean): string {
  return watchedText(rules, "text", [{ text: "<tool_call>", then: toolCalls(rules, tools, parallel, true) }], '""');
}
