// OpenAI Chat Completions request → Conversation IR + GenerationOptions.
import type { ChatModel, ContentPart, Conversation, GenerationOptions, Message, ResponseFormat, SamplingOptions, TextPart, ToolChoice, ToolDef } from "../../chat/ir.ts";
import { invalidRequest } from "../errors.ts";
import { imageFromUrl, requireVision } from "../images.ts";
import { generationOptions, logitBias, thinkingFromEffort } from "../options.ts";
import { checkStructuredOutput } from "../response-format.ts";
import { nameToolResults } from "../tool-names.ts";
import { parseArguments } from "../turn.ts";
import type { ChatRequest } from "./schema.ts";

export type ConvertContext = { model: ChatModel; sampling: SamplingOptions; signal: AbortSignal };

export function convertChatRequest(req: ChatRequest, ctx: ConvertContext): { conversation: Conversation; options: GenerationOptions } {
  const tools: ToolDef[] = (req.tools ?? []).map((t) => {
    const def: ToolDef = { name: t.function.name, parameters: t.function.parameters ?? { type: "object", properties: {} } };
    if (t.function.description) def.description = t.function.description;
    if (t.function.strict) def.strict = true;
    return def;
  });
  const thinking = thinkingFromEffort(req.reasoning_effort);
  if (req.chat_template_kwargs?.enable_thinking === false) thinking.enabled = false;
  const conversation: Conversation = {
    messages: convertMessages(req, ctx.model),
    tools,
    toolChoice: toolChoice(req, tools),
    parallelToolCalls: req.parallel_tool_calls ?? true,
    thinking,
    responseFormat: responseFormat(req),
  };
  checkStructuredOutput(conversation, {
    responseFormat: req.response_format?.type === "json_schema" ? "response_format.json_schema.schema" : "response_format",
    toolChoice: "tool_choice",
    tool: (i, field) => `tools.${i}.function.${field}`,
  });
  if (req.top_logprobs != null && !req.logprobs) throw invalidRequest("top_logprobs needs logprobs: true", "top_logprobs");
  const options = generationOptions(
    ctx.model,
    {
      maxTokens: req.max_completion_tokens ?? req.max_tokens,
      stop: typeof req.stop === "string" ? [req.stop] : (req.stop ?? []),
      sampling: {
        temperature: req.temperature,
        topP: req.top_p,
        topK: req.top_k,
        minP: req.min_p,
        presencePenalty: req.presence_penalty,
        frequencyPenalty: req.frequency_penalty,
        repetitionPenalty: req.repetition_penalty,
        seed: req.seed,
        logitBias: logitBias(req.logit_bias, ctx.model),
      },
      logprobs: req.logprobs ? (req.top_logprobs ?? 0) : undefined,
    },
    ctx.sampling,
    ctx.signal,
  );
  return { conversation, options };
}

function convertMessages(req: ChatRequest, model: ChatModel): Message[] {
  const messages = req.messages.map((m, i): Message => {
    const param = `messages.${i}.content`;
    switch (m.role) {
      case "system":
      case "developer":
        return { role: "system", content: textParts(m.content) };
      case "user":
        return { role: "user", content: userParts(m.content, model, param) };
      case "assistant": {
        const out: Message = { role: "assistant", content: assistantParts(m.content) };
        const reasoning = m.reasoning_content ?? m.reasoning;
        if (reasoning) out.reasoning = reasoning;
        if (m.tool_calls?.length) {
          out.toolCalls = m.tool_calls.map((c) => ({ id: c.id, name: c.function.name, arguments: parseArguments(c.function.arguments) }));
        }
        return out;
      }
      case "tool":
        return { role: "tool", toolCallId: m.tool_call_id, content: textParts(m.content) };
    }
  });
  return nameToolResults(messages);
}

function textParts(content: string | { text: string }[]): TextPart[] {
  return typeof content === "string" ? [{ type: "text", text: content }] : content.map((p) => ({ type: "text", text: p.text }));
}

function assistantParts(content: string | ({ type: "text"; text: string } | { type: "refusal"; refusal: string })[] | null | undefined): TextPart[] {
  if (content == null || content === "") return [];
  if (typeof content === "string") return [{ type: "text", text: content }];
  return content.map((p) => ({ type: "text", text: p.type === "text" ? p.text : p.refusal }));
}

function userParts(content: Extract<ChatRequest["messages"][number], { role: "user" }>["content"], model: ChatModel, param: string): ContentPart[] {
  if (typeof content === "string") return [{ type: "text", text: content }];
  return content.map((p, j): ContentPart => {
    switch (p.type) {
      case "text":
        return { type: "text", text: p.text };
      case "image_url":
        requireVision(model.vision, model.id, `${param}.${j}`);
        return { type: "image", source: imageFromUrl(p.image_url.url, `${param}.${j}.image_url.url`) };
      default:
        throw invalidRequest(`${p.type} content is not supported`, `${param}.${j}.type`, "unsupported_content");
    }
  });
}

function toolChoice(req: ChatRequest, tools: ToolDef[]): ToolChoice {
  const choice = req.tool_choice;
  if (choice == null) return "auto";
  if (typeof choice === "string") {
    if (choice === "required" && tools.length === 0) throw invalidRequest("'required' needs at least one tool in tools", "tool_choice");
    return choice;
  }
  const name = choice.function.name;
  if (!tools.some((t) => t.name === name)) throw invalidRequest(`names '${name}', which is not in tools`, "tool_choice.function.name");
  return { name };
}

function responseFormat(req: ChatRequest): ResponseFormat {
  const f = req.response_format;
  if (!f || f.type === "text") return { type: "text" };
  if (f.type === "json_object") return { type: "json_object" };
  // Enforced whether or not `strict` is set: a grammar gives the guarantee either way.
  const format: ResponseFormat = { type: "json_schema", name: f.json_schema.name, schema: f.json_schema.schema ?? {} };
  if (f.json_schema.strict != null) format.strict = f.json_schema.strict;
  return format;
}
