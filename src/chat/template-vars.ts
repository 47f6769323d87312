// The conversation IR as a chat template sees it: transformers' message shape (what the model's template was
// written for), with every string that came from the client passed through `escape`, so that added-token strings a
// client typed stay text when the rendered prompt is tokenized (src/tokenizer/tokenizer.ts explains the scheme).
//
// Conversions, each the one vLLM/transformers users expect:
//   - text parts of a message are joined with "\n" into a string; a message with images keeps a list of parts
//     ({type: "text", text} / {type: "image"}) so the template can place its vision placeholders;
//   - assistant reasoning becomes `reasoning_content`; reasoning a client left inline as "<think>…</think>" in the
//     content is split out first, the way the Qwen templates themselves split it (escaping would hide it from them);
//   - tool-call arguments are objects (a raw string a client sent is parsed when it is a JSON object);
//   - tools become OpenAI function schemas {type: "function", function: {name, description, parameters}};
//     with tool_choice "none" no tools are rendered, so the model has nothing to call.
import { offeredTools, type ContentPart, type Conversation, type Message, type ToolCall } from "./ir.ts";
import type { TemplateMessage, TemplatePart, TemplateToolCall, TemplateVariables } from "./template.ts";

type Escape = (s: string) => string;

// Every string inside a JSON-like value, escaped (tool arguments and schemas).
function escapeDeep(v: unknown, escape: Escape): unknown {
  if (typeof v === "string") return escape(v);
  if (Array.isArray(v)) return v.map((x) => escapeDeep(x, escape));
  if (v && typeof v === "object") {
    return Object.fromEntries(Object.entries(v as Record<string, unknown>).map(([k, x]) => [escape(k), escapeDeep(x, escape)]));
  }
  return v;
}

function joinText(parts: ContentPart[]): string {
  return parts
    .filter((p) => p.type === "text")
    .map((p) => p.text)
    .join("\n");
}

function content(parts: ContentPart[], escape: Escape): string | TemplatePart[] {
  if (!parts.some((p) => p.type === "image")) return escape(joinText(parts));
  return parts.map((p): TemplatePart => (p.type === "image" ? { type: "image" } : { type: "text", text: escape(p.text) }));
}

// What the Qwen templates do with "<think>…</think>" left in an assistant's content.
export function splitInlineReasoning(text: string): { reasoning?: string; content: string } {
  const end = text.indexOf("</think>");
  if (end < 0) return { content: text };
  const head = text.slice(0, end).replace(/\n+$/, "");
  const reasoning = head.slice(head.lastIndexOf("<think>") >= 0 ? head.lastIndexOf("<think>") + "<think>".length : 0).replace(/^\n+/, "");
  return { reasoning, content: text.slice(text.lastIndexOf("</think>") + "</think>".length).replace(/^\n+/, "") };
}

function toolCall(c: ToolCall, escape: Escape): TemplateToolCall {
  let args: Record<string, unknown> | string = c.arguments;
  if (typeof args === "string") {
    try {
      const parsed: unknown = JSON.parse(args);
      if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) args = parsed as Record<string, unknown>;
    } catch {
      // Not JSON: the template gets the string as the client sent it.
    }
  }
  return {
    id: escape(c.id),
    type: "function",
    function: { name: escape(c.name), arguments: escapeDeep(args, escape) as Record<string, unknown> | string },
  };
}

function message(m: Message, escape: Escape): TemplateMessage {
  switch (m.role) {
    case "system":
      return { role: "system", content: escape(joinText(m.content)) };
    case "user":
      return { role: "user", content: content(m.content, escape) };
    case "tool": {
      const t: TemplateMessage = { role: "tool", content: content(m.content, escape), tool_call_id: escape(m.toolCallId) };
      if (m.name !== undefined) t.name = escape(m.name);
      return t;
    }
    case "assistant": {
      let text = joinText(m.content);
      let reasoning = m.reasoning;
      if (reasoning === undefined) {
        const split = splitInlineReasoning(text);
        text = split.content;
        reasoning = split.reasoning;
      }
      const a: TemplateMessage = { role: "assistant", content: escape(text) };
      if (reasoning !== undefined) a.reasoning_content = escape(reasoning);
      if (m.toolCalls?.length) a.tool_calls = m.toolCalls.map((c) => toolCall(c, escape));
      return a;
    }
  }
}

// Qwen-family templates accept one system message, first, and raise on any other. Clients send more: OpenAI chat
// allows system/developer messages anywhere, and Claude Code puts a system-role message among the turns. Leading
// system messages merge into one; a later one becomes a user turn in its place, which keeps the order of what the
// model reads and leaves the system prompt (and so the cached prefix) unchanged from turn to turn.
function placeSystemMessages(messages: TemplateMessage[]): TemplateMessage[] {
  const out: TemplateMessage[] = [];
  for (const m of messages) {
    if (m.role !== "system") out.push(m);
    else if (out.length === 0) out.push(m);
    else if (out.length === 1 && out[0]!.role === "system") out[0] = { role: "system", content: `${out[0]!.content as string}\n\n${m.content as string}` };
    else out.push({ role: "user", content: m.content });
  }
  return out;
}

export function templateVariables(conversation: Conversation, escape: Escape, addGenerationPrompt = true): TemplateVariables {
  const vars: TemplateVariables = {
    messages: placeSystemMessages(conversation.messages.map((m) => message(m, escape))),
    add_generation_prompt: addGenerationPrompt,
    enable_thinking: conversation.thinking.enabled,
  };
  const tools = offeredTools(conversation);
  if (tools.length) {
    vars.tools = tools.map((t) => {
      // Key order is what tojson prints: name, description, parameters, as OpenAI clients send them.
      const parameters = escapeDeep(t.parameters, escape) as Record<string, unknown>;
      const fn = t.description === undefined ? { name: escape(t.name), parameters } : { name: escape(t.name), description: escape(t.description), parameters };
      return { type: "function", function: fn };
    });
  }
  if (conversation.thinking.preserve !== undefined) vars.preserve_thinking = conversation.thinking.preserve;
  if (conversation.thinking.effort !== undefined) vars.reasoning_effort = conversation.thinking.effort;
  return vars;
}
