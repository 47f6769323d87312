// Anthropic Messages request → Conversation IR + GenerationOptions.
//
// Anthropic puts tool results inside user messages; the IR gives each its own tool message, in place, so a user
// turn [tool_result, tool_result, text] becomes two tool messages and a user message.
import type { ChatModel, ContentPart, Conversation, GenerationOptions, ImageSource, Message, ReasoningEffort, ResponseFormat, SamplingOptions, ToolChoice, ToolDef } from "../../chat/ir.ts";
import { invalidRequest } from "../errors.ts";
import { base64Image, imageFromUrl, requireVision } from "../images.ts";
import { generationOptions } from "../options.ts";
import { checkStructuredOutput } from "../response-format.ts";
import { nothingToRead } from "../schema-common.ts";
import { nameToolResults } from "../tool-names.ts";
import type { Block, CountTokensRequest, MessagesRequest } from "./schema.ts";

export type AnthropicContext = { model: ChatModel; sampling: SamplingOptions; signal: AbortSignal };

// Claude Code's first system block carries a per-request hash unless CLAUDE_CODE_ATTRIBUTION_HEADER=0; it would
// defeat the prefix cache on every turn and means nothing to a local model, so it is left out.
const ATTRIBUTION = /^x-anthropic-billing-header:/;

export function anthropicConversation(req: CountTokensRequest, model: ChatModel): Conversation {
  const tools: ToolDef[] = [];
  (req.tools ?? []).forEach((t, i) => {
    if (t.type && t.type !== "custom") return; // a server tool, run by Anthropic's platform: nothing to offer here
    if (!t.input_schema) throw invalidRequest("required field is missing", `tools.${i}.input_schema`);
    const def: ToolDef = { name: t.name, parameters: t.input_schema };
    if (t.description) def.description = t.description;
    tools.push(def);
  });
  const system = typeof req.system === "string" ? [{ type: "text" as const, text: req.system }] : (req.system ?? []).flatMap((b) => (b.type === "text" && !ATTRIBUTION.test(b.text) ? [{ type: "text" as const, text: b.text }] : []));
  const messages: Message[] = system.length && system.some((p) => p.text) ? [{ role: "system", content: system }] : [];
  req.messages.forEach((m, i) => messages.push(...convertMessage(m, i, model)));
  if (messages.length === 0) throw nothingToRead("messages", req.messages.flatMap((m) => (typeof m.content === "string" ? [] : m.content.flatMap((b) => (b.type === "ignored" ? [b.was] : [])))));
  nameToolResults(messages);
  const effort = req.output_config?.effort;
  const thinkingOn = req.thinking?.type === "enabled" || req.thinking?.type === "adaptive";
  return {
    messages,
    tools,
    toolChoice: toolChoice(req, tools),
    parallelToolCalls: !req.tool_choice || req.tool_choice.type === "none" || !req.tool_choice.disable_parallel_tool_use,
    // Anthropic's default is no thinking: only an explicit `thinking` turns it on.
    thinking: thinkingOn ? { enabled: true, ...(effort ? { effort: effortLevel(effort) } : {}) } : { enabled: false },
    responseFormat: responseFormat(req),
  };
}

export function convertMessagesRequest(req: MessagesRequest, ctx: AnthropicContext): { conversation: Conversation; options: GenerationOptions } {
  const conversation = anthropicConversation(req, ctx.model);
  // Server tools are not offered to the model: IR tool i is the i-th custom tool of the request.
  const toolIndex = (req.tools ?? []).flatMap((t, j) => (t.type && t.type !== "custom" ? [] : [j]));
  checkStructuredOutput(conversation, {
    responseFormat: req.output_config?.format ? "output_config.format.schema" : "output_format.schema",
    toolChoice: "tool_choice",
    tool: (i, field) => `tools.${toolIndex[i]}.${field === "parameters" ? "input_schema" : "name"}`,
  });
  const options = generationOptions(
    ctx.model,
    { maxTokens: req.max_tokens, stop: req.stop_sequences ?? [], sampling: { temperature: req.temperature, topP: req.top_p, topK: req.top_k, minP: req.min_p, seed: req.seed } },
    ctx.sampling,
    ctx.signal,
  );
  return { conversation, options };
}

function effortLevel(effort: ReasoningEffort | "max"): ReasoningEffort {
  return effort === "max" ? "xhigh" : effort;
}

function convertMessage(m: MessagesRequest["messages"][number], i: number, model: ChatModel): Message[] {
  const param = `messages.${i}.content`;
  // As Anthropic's API: only an assistant turn may be empty (the prefill of the answer).
  if (m.role !== "assistant" && Array.isArray(m.content) && m.content.length === 0) throw invalidRequest("a message needs at least one content block (only an assistant message may be empty)", param);
  const blocks: Block[] = typeof m.content === "string" ? [{ type: "text", text: m.content }] : m.content;
  if (m.role === "assistant") {
    const out: Extract<Message, { role: "assistant" }> = { role: "assistant", content: [] };
    for (const b of blocks) {
      if (b.type === "text") out.content.push({ type: "text", text: b.text });
      else if (b.type === "thinking") out.reasoning = (out.reasoning ?? "") + b.thinking;
      else if (b.type === "tool_use") {
        const args = b.input !== null && typeof b.input === "object" && !Array.isArray(b.input) ? (b.input as Record<string, unknown>) : JSON.stringify(b.input ?? {});
        out.toolCalls = [...(out.toolCalls ?? []), { id: b.id, name: b.name, arguments: args }];
      }
    }
    return [out];
  }
  if (m.role === "system") {
    const text = blocks.flatMap((b, j) => {
      if (b.type === "text") return [{ type: "text" as const, text: b.text }];
      if (b.type === "ignored") return [];
      throw invalidRequest(`a system message holds text only, not ${b.type} blocks`, `${param}.${j}.type`);
    });
    return text.length ? [{ role: "system", content: text }] : [];
  }
  const out: Message[] = [];
  let pending: ContentPart[] = [];
  const flush = () => {
    if (pending.length) out.push({ role: "user", content: pending });
    pending = [];
  };
  blocks.forEach((b, j) => {
    const at = `${param}.${j}`;
    switch (b.type) {
      case "text":
        pending.push({ type: "text", text: b.text });
        return;
      case "image":
        pending.push({ type: "image", source: image(b.source, model, at) });
        return;
      case "tool_result": {
        flush();
        const content: ContentPart[] =
          typeof b.content === "string"
            ? [{ type: "text", text: b.content }]
            : (b.content ?? []).flatMap((c, k): ContentPart[] => (c.type === "text" ? [c] : c.type === "image" ? [{ type: "image", source: image(c.source, model, `${at}.content.${k}`) }] : []));
        out.push({ role: "tool", toolCallId: b.tool_use_id, content });
        return;
      }
      case "document":
        throw invalidRequest("document blocks are not supported", `${at}.type`);
      case "tool_use":
      case "thinking":
        throw invalidRequest(`${b.type} blocks belong in assistant messages`, `${at}.type`);
      case "ignored":
        return;
    }
  });
  flush();
  return out;
}

function image(source: Extract<Block, { type: "image" }>["source"], model: ChatModel, param: string): ImageSource {
  requireVision(model.vision, model.id, param);
  if (source.type === "base64") return base64Image(source.data, source.media_type, `${param}.source.data`);
  if (source.type === "url") return imageFromUrl(source.url, `${param}.source.url`);
  throw invalidRequest("only base64 and url image sources are supported (no uploaded files)", `${param}.source.type`, "unsupported_content");
}

function toolChoice(req: CountTokensRequest, tools: ToolDef[]): ToolChoice {
  const c = req.tool_choice;
  if (!c || c.type === "auto") return "auto";
  if (c.type === "none") return "none";
  if (c.type === "any") {
    if (tools.length === 0) throw invalidRequest("'any' needs at least one tool in tools", "tool_choice");
    return "required";
  }
  if (!tools.some((t) => t.name === c.name)) throw invalidRequest(`names '${c.name}', which is not in tools`, "tool_choice.name");
  return { name: c.name };
}

// Structured outputs: `output_config.format` (generally available) or the beta's `output_format`, both
// {type: "json_schema", schema}; the answer is the JSON text in a text block.
function responseFormat(req: CountTokensRequest): ResponseFormat {
  const f = req.output_config?.format ?? req.output_format;
  if (!f) return { type: "text" };
  return { type: "json_schema", schema: f.schema };
}
