// Which grammar a conversation needs, from its response format, tools and tool choice:
//
//   tool_choice required / {name}      → one or more tool calls (one unless parallel), to any tool / that tool
//   tool_choice auto, JSON response    → the JSON value, or tool calls
//   tool_choice auto, a strict tool    → free text, optionally followed by tool calls
//   otherwise, JSON response           → the JSON value (json_object: any object)
//   otherwise                          → no constraint
//
// Tool arguments are always constrained by their schemas once any grammar is active. Answers may start with up to
// two newlines (a thinking model writes "\n\n" after </think>).
import { offeredTools, type Conversation } from "../../chat/ir.ts";
import { CountedSchema, toolBounds, type BoundsPlan, type Counted, type ToolBounds } from "./bounds.ts";
import { Rules } from "./ebnf.ts";
import { JsonWriter } from "./json-grammar.ts";
import { compileSchema, SchemaError, type CompiledSchema } from "./schema.ts";
import { textThenToolCalls, ToolParameterError, toolCalls, type ToolSchema } from "./tool-grammar.ts";

export type ConstraintRequest = Pick<Conversation, "responseFormat" | "tools" | "toolChoice" | "parallelToolCalls">;

export type GrammarKind = "json" | "tool_calls" | "json_or_tool_calls" | "text_or_tool_calls";
// The grammar, and the counts the constraint keeps beside it (null: none).
export type GrammarPlan = { kind: GrammarKind; ebnf: string; bounds: BoundsPlan | null };

// A request field the grammar cannot serve (an unknown tool name in tool_choice, a bad tool name).
export class ConstraintError extends Error {
  override name = "ConstraintError";
  constructor(
    message: string,
    readonly param: string, // the request field, in the IR's terms ("responseFormat.schema", "tools[2].parameters", "toolChoice")
    readonly keyword?: string,
    readonly schemaPath?: string,
  ) {
    super(message);
  }
}

const LEADING_NEWLINES = '("\\n" "\\n"?)?';

// Which grammar a request needs, or null when it needs none; cheap (no schema is read). Throws ConstraintError for a
// tool choice that cannot be served.
export function grammarKind(req: ConstraintRequest): GrammarKind | null {
  const json = req.responseFormat.type !== "text";
  const forced = req.toolChoice === "required" || typeof req.toolChoice === "object";
  const tools = callableTools(req);
  if (forced) return "tool_calls";
  if (tools.length && json) return "json_or_tool_calls";
  if (tools.some((t) => t.strict)) return "text_or_tool_calls";
  return json ? "json" : null;
}

// The tools a grammar may call: all of them, the one tool_choice names, or none with tool_choice "none".
function callableTools(req: ConstraintRequest): ConstraintRequest["tools"] {
  const forced = req.toolChoice === "required" || typeof req.toolChoice === "object";
  const tools = offeredTools(req);
  if (forced && tools.length === 0) throw new ConstraintError("tool_choice requires a tool call, but the request has no tools", "toolChoice");
  if (typeof req.toolChoice !== "object") return tools;
  const name = req.toolChoice.name;
  const named = tools.filter((t) => t.name === name);
  if (named.length === 0) throw new ConstraintError(`tool_choice names "${name}", which is not among the request's tools`, "toolChoice");
  return named;
}

// The grammar for a request, or null when it needs none. Throws ConstraintError.
export function planGrammar(req: ConstraintRequest): GrammarPlan | null {
  const kind = grammarKind(req);
  if (!kind) return null;
  const rf = req.responseFormat;
  const json = rf.type === "json_schema" ? schemaOf(rf.schema, "responseFormat.schema", "response format schema") : rf.type === "json_object" ? compileSchema({ type: "object" }) : null;
  const callable = callableTools(req);

  const rules = new Rules();
  const toolSchemas = kind === "json" ? [] : toolSchemasOf(req, callable);
  const jsonValue = () => new JsonWriter(rules, json!).value(json!.root);
  const calls = () => toolCalls(rules, toolSchemas, req.parallelToolCalls);
  let root: string;
  try {
    root = {
      json: () => `${LEADING_NEWLINES} ${jsonValue()}`,
      tool_calls: () => `${LEADING_NEWLINES} ${calls()}`,
      json_or_tool_calls: () => `${LEADING_NEWLINES} (${jsonValue()} | ${calls()})`,
      text_or_tool_calls: () => textThenToolCalls(rules, toolSchemas, req.parallelToolCalls),
    }[kind]();
  } catch (e) {
    // Raw tool parameter text is more restricted than a JSON string; what it cannot hold surfaces here.
    if (e instanceof ToolParameterError) {
      throw new ConstraintError(`tool "${e.tool}" parameters: ${e.message}`, `tools[${req.tools.findIndex((t) => t.name === e.tool)}].parameters`, e.keyword, e.path);
    }
    throw e;
  }
  return { kind, ebnf: rules.text(root), bounds: boundsOf(req, kind, json, toolSchemas) };
}

function boundsOf(req: ConstraintRequest, kind: GrammarKind, json: CompiledSchema | null, tools: ToolSchema[]): BoundsPlan | null {
  let counted: Counted | null = null;
  if (json && kind !== "tool_calls" && kind !== "text_or_tool_calls") {
    try {
      counted = new CountedSchema(json).of(json.root);
    } catch (e) {
      if (e instanceof SchemaError) throw new ConstraintError(`response format schema: ${e.message}`, "responseFormat.schema", e.keyword, e.path);
      throw e;
    }
  }
  if (kind === "json") return counted && { kind: "json", root: counted };
  const byTool = new Map<string, ToolBounds>();
  for (const tool of tools) {
    let root = tool.schema.root;
    while (root.kind === "ref") root = tool.schema.defs.get(root.id)!;
    if (root.kind !== "object") continue;
    try {
      const b = toolBounds(tool.schema, root.properties);
      if (b) byTool.set(tool.name, b);
    } catch (e) {
      if (e instanceof SchemaError) throw new ConstraintError(`tool "${tool.name}" parameters: ${e.message}`, `tools[${req.tools.findIndex((t) => t.name === tool.name)}].parameters`, e.keyword, e.path);
      throw e;
    }
  }
  if (!counted && byTool.size === 0) return null;
  return { kind: "tools", start: kind === "tool_calls" ? "calls" : kind === "json_or_tool_calls" ? "json_or_calls" : "text", json: counted, tools: byTool };
}

function schemaOf(schema: unknown, param: string, label: string): CompiledSchema {
  try {
    return compileSchema(schema);
  } catch (e) {
    if (e instanceof SchemaError) throw new ConstraintError(`${label}: ${e.message}`, param, e.keyword, e.path);
    throw e;
  }
}

const NAME = /^[^\s<>]+$/;

function toolSchemasOf(req: ConstraintRequest, callable: ConstraintRequest["tools"]): ToolSchema[] {
  const seen = new Set<string>();
  return callable.map((tool) => {
    const index = req.tools.indexOf(tool);
    const param = `tools[${index}]`;
    if (!NAME.test(tool.name)) throw new ConstraintError(`tool name ${JSON.stringify(tool.name)} cannot be written in a tool call (no spaces, "<" or ">")`, `${param}.name`);
    if (seen.has(tool.name)) throw new ConstraintError(`two tools are named "${tool.name}"`, `${param}.name`);
    seen.add(tool.name);
    const schema = schemaOf(tool.parameters, `${param}.parameters`, `tool "${tool.name}" parameters`);
    let root = schema.root;
    while (root.kind === "ref") root = schema.defs.get(root.id)!;
    if (root.kind !== "object") throw new ConstraintError(`tool "${tool.name}" parameters: must be an object schema`, `${param}.parameters`, "type");
    for (const p of root.properties) {
      if (!NAME.test(p.name)) throw new ConstraintError(`tool "${tool.name}" parameter ${JSON.stringify(p.name)} cannot be written in a tool call (no spaces, "<" or ">")`, `${param}.parameters`, "properties");
    }
    return { name: tool.name, schema };
  });
}
