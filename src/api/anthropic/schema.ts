// POST /v1/messages and /v1/messages/count_tokens: the request as Anthropic documents it and Claude Code sends it.
//
// Claude Code sends many fields this server does not use (cache_control, context_management, output_config.effort,
// metadata, tool strict/defer_loading/eager_input_streaming, thinking signatures): all are accepted. Block kinds
// it does not know (server tool results, redacted thinking, tool references) are dropped; server tools (those with a
// `type` other than "custom", e.g. web_search_20250305) are not offered to the model.
import { z } from "zod";
import { EFFORTS } from "../options.ts";
import { Ignored, JsonObject, Probability, Seed, StopSequences, Temperature, TopK, tagUnknown } from "../schema-common.ts";

const ImageSource = z.discriminatedUnion("type", [
  z.object({ type: z.literal("base64"), media_type: z.string(), data: z.string() }),
  z.object({ type: z.literal("url"), url: z.string() }),
  z.object({ type: z.literal("file"), file_id: z.string() }),
]);

const TextBlock = z.object({ type: z.literal("text"), text: z.string() });
const ImageBlock = z.object({ type: z.literal("image"), source: ImageSource });

const KNOWN_BLOCKS = ["text", "image", "document", "tool_use", "tool_result", "thinking"];

const ToolResultContent = z.union([z.string(), z.array(z.preprocess(tagUnknown(["text", "image"]), z.discriminatedUnion("type", [TextBlock, ImageBlock, Ignored])))]);

const Block = z.preprocess(
  tagUnknown(KNOWN_BLOCKS),
  z.discriminatedUnion("type", [
    TextBlock,
    ImageBlock,
    z.object({ type: z.literal("document") }),
    z.object({ type: z.literal("tool_use"), id: z.string(), name: z.string(), input: z.unknown() }),
    z.object({ type: z.literal("tool_result"), tool_use_id: z.string(), content: ToolResultContent.nullish(), is_error: z.boolean().nullish() }),
    z.object({ type: z.literal("thinking"), thinking: z.string(), signature: z.string().nullish() }),
    Ignored,
  ]),
);
export type Block = z.infer<typeof Block>;

// "system" is not in Anthropic's documented roles, but Claude Code sends system-role messages among the turns.
const Message = z.object({ role: z.enum(["user", "assistant", "system"]), content: z.union([z.string(), z.array(Block)]) });

const Tool = z.object({ type: z.string().nullish(), name: z.string().min(1), description: z.string().nullish(), input_schema: JsonObject.nullish() });

const ToolChoice = z.discriminatedUnion("type", [
  z.object({ type: z.literal("auto"), disable_parallel_tool_use: z.boolean().nullish() }),
  z.object({ type: z.literal("any"), disable_parallel_tool_use: z.boolean().nullish() }),
  z.object({ type: z.literal("tool"), name: z.string(), disable_parallel_tool_use: z.boolean().nullish() }),
  z.object({ type: z.literal("none") }),
]);

const Thinking = z.discriminatedUnion("type", [
  z.object({ type: z.literal("enabled"), budget_tokens: z.number().int().nullish() }),
  z.object({ type: z.literal("adaptive") }),
  z.object({ type: z.literal("disabled") }),
]);

const OutputFormat = z.discriminatedUnion("type", [z.object({ type: z.literal("json_schema"), schema: JsonObject })]);

// Anthropic's effort levels ("max" is its top) next to OpenAI's names, which some gateways forward.
const Effort = z.enum([...EFFORTS, "max"]);

const Conversation = {
  model: z.string(),
  messages: z.array(Message).min(1),
  system: z.union([z.string(), z.array(z.preprocess(tagUnknown(["text"]), z.discriminatedUnion("type", [TextBlock, Ignored])))]).nullish(),
  tools: z.array(Tool).nullish(),
  tool_choice: ToolChoice.nullish(),
  thinking: Thinking.nullish(),
  output_config: z.object({ effort: Effort.nullish(), format: OutputFormat.nullish() }).nullish(),
  output_format: OutputFormat.nullish(),
};

export const MessagesRequest = z.object({
  ...Conversation,
  max_tokens: z.number().int().min(1),
  stop_sequences: StopSequences.nullish(),
  stream: z.boolean().nullish(),
  temperature: Temperature(1),
  top_p: Probability,
  top_k: TopK,
  // Not Anthropic's, but harmless to honour for clients that tune a local model.
  min_p: Probability,
  seed: Seed,
});
export type MessagesRequest = z.infer<typeof MessagesRequest>;

export const CountTokensRequest = z.object(Conversation);
export type CountTokensRequest = z.infer<typeof CountTokensRequest>;
