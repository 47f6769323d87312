// OpenAI Responses request → Conversation IR + GenerationOptions.
//
// The items of one assistant turn (reasoning, output message, function calls) arrive as separate input items;
// they are folded back into one assistant message, the shape chat templates render.
import type { ChatModel, ContentPart, Conversation, GenerationOptions, Message, ResponseFormat, SamplingOptions, ToolCall, ToolChoice, ToolDef } from "../../chat/ir.ts";
import { invalidRequest } from "../errors.ts";
import { imageFromUrl, requireVision } from "../images.ts";
import { generationOptions, thinkingFromEffort } from "../options.ts";
import { checkStructuredOutput } from "../response-format.ts";
import { nothingToRead } from "../schema-common.ts";
import { nameToolResults } from "../tool-names.ts";
import { parseArguments } from "../turn.ts";
import type { InputItem, ResponsesContentPart, ResponsesRequest } from "./schema.ts";

export type ResponsesContext = { model: ChatModel; sampling: SamplingOptions; signal: AbortSignal; history: Message[] };

export type ConvertedResponsesRequest = {
  conversation: Conversation;
  options: GenerationOptions;
  input: Message[]; // this request's own messages, without instructions: what a stored response adds to its history
  customTools: Set<string>; // tools whose calls are reported as custom_tool_call items
};

export function convertResponsesRequest(req: ResponsesRequest, ctx: ResponsesContext): ConvertedResponsesRequest {
  const customTools = new Set<string>();
  const tools: ToolDef[] = [];
  const toolIndex: number[] = []; // IR tool → its index in req.tools (tools Splash does not run are dropped)
  for (const [j, t] of (req.tools ?? []).entries()) {
    if (t.type === "function" || t.type === "custom") toolIndex.push(j);
    if (t.type === "function") {
      const def: ToolDef = { name: t.name, parameters: t.parameters ?? { type: "object", properties: {} } };
      if (t.description) def.description = t.description;
      if (t.strict) def.strict = true;
      tools.push(def);
    } else if (t.type === "custom") {
      // A freeform tool becomes a function taking the whole input as one string.
      customTools.add(t.name);
      const def: ToolDef = { name: t.name, parameters: { type: "object", properties: { input: { type: "string" } }, required: ["input"] } };
      if (t.description) def.description = t.description;
      tools.push(def);
    }
  }
  const input = typeof req.input === "string" ? [{ role: "user" as const, content: [{ type: "text" as const, text: req.input }] }] : convertItems(req.input, ctx.model);
  const messages: Message[] = nameToolResults([...(req.instructions ? [{ role: "system" as const, content: [{ type: "text" as const, text: req.instructions }] }] : []), ...ctx.history, ...input]);
  if (messages.length === 0) throw nothingToRead("input", typeof req.input === "string" ? [] : req.input.flatMap((item) => (item.type === "ignored" ? [item.was] : [])));
  const conversation: Conversation = {
    messages,
    tools,
    toolChoice: toolChoice(req, tools),
    parallelToolCalls: req.parallel_tool_calls ?? true,
    thinking: thinkingFromEffort(req.reasoning?.effort),
    responseFormat: responseFormat(req),
  };
  checkStructuredOutput(conversation, {
    responseFormat: req.text?.format?.type === "json_schema" ? "text.format.schema" : "text.format",
    toolChoice: "tool_choice",
    tool: (i, field) => `tools.${toolIndex[i]}.${field}`,
  });
  const options = generationOptions(
    ctx.model,
    {
      maxTokens: req.max_output_tokens,
      sampling: { temperature: req.temperature, topP: req.top_p, topK: req.top_k, minP: req.min_p, presencePenalty: req.presence_penalty, frequencyPenalty: req.frequency_penalty, repetitionPenalty: req.repetition_penalty, seed: req.seed },
      logprobs: req.top_logprobs ?? undefined,
    },
    ctx.sampling,
    ctx.signal,
  );
  return { conversation, options, input, customTools };
}

function convertItems(items: InputItem[], model: ChatModel): Message[] {
  const out: Message[] = [];
  // The assistant message the next assistant-side item belongs to, while nothing else came in between.
  const open = (): Extract<Message, { role: "assistant" }> | undefined => {
    const last = out.at(-1);
    return last?.role === "assistant" ? last : undefined;
  };
  const addCall = (call: ToolCall) => {
    const a = open();
    if (a) a.toolCalls = [...(a.toolCalls ?? []), call];
    else out.push({ role: "assistant", content: [], toolCalls: [call] });
  };
  items.forEach((item, i) => {
    const param = `input.${i}`;
    switch (item.type) {
      case "message": {
        const content = parts(item.content, model, `${param}.content`);
        if (item.role === "assistant") {
          const text = content.flatMap((p) => (p.type === "text" ? [p] : []));
          const a = open();
          if (a && a.content.length === 0 && !a.toolCalls) a.content = text;
          else out.push({ role: "assistant", content: text });
        } else if (item.role === "user") {
          out.push({ role: "user", content });
        } else {
          out.push({ role: "system", content: content.flatMap((p) => (p.type === "text" ? [p] : [])) });
        }
        return;
      }
      case "reasoning": {
        const text = (item.content?.length ? item.content : (item.summary ?? [])).map((p) => p.text).join("\n");
        if (!text) return;
        const a = open();
        if (a && a.content.length === 0 && !a.toolCalls) a.reasoning = (a.reasoning ?? "") + text;
        else out.push({ role: "assistant", content: [], reasoning: text });
        return;
      }
      case "function_call":
        return addCall({ id: item.call_id, name: item.name, arguments: parseArguments(item.arguments) });
      case "custom_tool_call":
        return addCall({ id: item.call_id, name: item.name, arguments: { input: item.input } });
      case "local_shell_call":
        return addCall({ id: item.call_id, name: "local_shell", arguments: item.action });
      case "function_call_output":
      case "custom_tool_call_output":
        out.push({ role: "tool", toolCallId: item.call_id, content: typeof item.output === "string" ? [{ type: "text", text: item.output }] : parts(item.output, model, `${param}.output`) });
        return;
      case "local_shell_call_output": {
        const id = item.call_id ?? item.id ?? "";
        out.push({ role: "tool", toolCallId: id, content: [{ type: "text", text: item.output }] });
        return;
      }
      case "ignored":
        return;
    }
  });
  return out;
}

function parts(content: string | ResponsesContentPart[], model: ChatModel, param: string): ContentPart[] {
  if (typeof content === "string") return [{ type: "text", text: content }];
  return content.map((p, j): ContentPart => {
    switch (p.type) {
      case "input_text":
      case "output_text":
        return { type: "text", text: p.text };
      case "refusal":
        return { type: "text", text: p.refusal };
      case "input_image":
        requireVision(model.vision, model.id, `${param}.${j}`);
        if (!p.image_url) throw invalidRequest("only image_url images are supported (no uploaded files)", `${param}.${j}.image_url`, "unsupported_content");
        return { type: "image", source: imageFromUrl(p.image_url, `${param}.${j}.image_url`) };
      default:
        throw invalidRequest(`${p.type} content is not supported`, `${param}.${j}.type`, "unsupported_content");
    }
  });
}

function toolChoice(req: ResponsesRequest, tools: ToolDef[]): ToolChoice {
  const choice = req.tool_choice;
  if (choice == null) return "auto";
  if (typeof choice === "string") {
    if (choice === "required" && tools.length === 0) throw invalidRequest("'required' needs at least one tool in tools", "tool_choice");
    return choice;
  }
  if (!("name" in choice)) return "auto";
  if (!tools.some((t) => t.name === choice.name)) throw invalidRequest(`names '${choice.name}', which is not in tools`, "tool_choice.name");
  return { name: choice.name };
}

function responseFormat(req: ResponsesRequest): ResponseFormat {
  const f = req.text?.format;
  if (!f || f.type === "text") return { type: "text" };
  if (f.type === "json_object") return { type: "json_object" };
  const format: ResponseFormat = { type: "json_schema", name: f.name, schema: f.schema };
  if (f.strict != null) format.strict = f.strict;
  return format;
}
