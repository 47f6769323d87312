// Tool results carry only the call's id on the wire (OpenAI, Anthropic); templates that print the tool's name
// next to its result get it from the assistant message that made the call.
import type { Message } from "../chat/ir.ts";

export function nameToolResults(messages: Message[]): Message[] {
  const names = new Map<string, string>();
  for (const m of messages) {
    if (m.role === "assistant") for (const c of m.toolCalls ?? []) names.set(c.id, c.name);
    if (m.role === "tool" && m.name === undefined) {
      const name = names.get(m.toolCallId);
      if (name !== undefined) m.name = name;
    }
  }
  return messages;
}
