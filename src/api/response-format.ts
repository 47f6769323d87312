// Where structured output plugs into every surface. OpenAI chat `response_format`, Responses `text.format` and
// Anthropic `output_config.format` / `output_format` arrive in the Conversation as its ResponseFormat; a forced tool
// choice and strict tools constrain tool calls. The grammar (src/engine/grammar) is written here once to check that
// it can enforce all of it (milliseconds, no compile), so that a schema it cannot enforce is a 400 naming the
// surface's own field, before any generation starts. The compile happens when the generation starts.
import type { Conversation } from "../chat/ir.ts";
import { ConstraintError, planGrammar } from "../engine/grammar/request.ts";
import { constraintApiError } from "./errors.ts";

// How a surface names the fields a ConstraintError points at (the IR's responseFormat.schema, toolChoice, tools[i]).
export type ConstraintFields = {
  responseFormat: string; // the response format's schema field, e.g. "response_format.json_schema.schema"
  toolChoice: string;
  tool: (irIndex: number, field: "name" | "parameters") => string; // the request's field of the IR's tools[irIndex]
};

// Throws an ApiError (400) when the conversation asks for output the grammar cannot enforce.
export function checkStructuredOutput(conversation: Conversation, fields: ConstraintFields): void {
  try {
    planGrammar(conversation);
  } catch (e) {
    if (e instanceof ConstraintError) throw constraintApiError(e, surfaceField(e.param, fields));
    throw e;
  }
}

function surfaceField(irParam: string, fields: ConstraintFields): string {
  if (irParam.startsWith("responseFormat")) return fields.responseFormat;
  if (irParam === "toolChoice") return fields.toolChoice;
  const tool = /^tools\[(\d+)\]\.(name|parameters)$/.exec(irParam);
  if (tool) return fields.tool(Number(tool[1]), tool[2] as "name" | "parameters");
  return irParam === "tools" ? "tools" : irParam;
}
