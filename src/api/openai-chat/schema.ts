// POST /v1/chat/completions: the request as OpenAI documents it, and what Splash reads of it.
import { z } from "zod";
import { EFFORTS } from "../options.ts";
import { JsonObject, LogitBiasMap, MaxTokens, Penalty, Probability, RepetitionPenalty, Seed, StopSequences, Temperature, TopK, TopLogprobs } from "../schema-common.ts";

const TextPart = z.object({ type: z.literal("text"), text: z.string() });
const ImageUrlPart = z.object({
  type: z.literal("image_url"),
  image_url: z.object({ url: z.string(), detail: z.string().nullish() }),
});
const UserPart = z.discriminatedUnion("type", [
  TextPart,
  ImageUrlPart,
  z.object({ type: z.literal("input_audio") }),
  z.object({ type: z.literal("file") }),
]);
const AssistantPart = z.discriminatedUnion("type", [TextPart, z.object({ type: z.literal("refusal"), refusal: z.string() })]);

export const ToolCallSchema = z.object({
  id: z.string(),
  type: z.literal("function").optional(),
  function: z.object({ name: z.string(), arguments: z.string() }),
});

const Message = z.discriminatedUnion("role", [
  z.object({ role: z.enum(["system", "developer"]), content: z.union([z.string(), z.array(TextPart)]) }),
  z.object({ role: z.literal("user"), content: z.union([z.string(), z.array(UserPart)]) }),
  z.object({
    role: z.literal("assistant"),
    content: z.union([z.string(), z.array(AssistantPart)]).nullish(),
    // Reasoning sent back by clients that keep it (vLLM's and OpenRouter's names).
    reasoning_content: z.string().nullish(),
    reasoning: z.string().nullish(),
    tool_calls: z.array(ToolCallSchema).nullish(),
  }),
  z.object({ role: z.literal("tool"), tool_call_id: z.string(), content: z.union([z.string(), z.array(TextPart)]) }),
]);

const Tool = z.object({
  type: z.literal("function"),
  function: z.object({
    name: z.string().min(1),
    description: z.string().nullish(),
    parameters: JsonObject.nullish(),
    strict: z.boolean().nullish(),
  }),
});

const ToolChoice = z.union([
  z.enum(["none", "auto", "required"]),
  z.object({ type: z.literal("function"), function: z.object({ name: z.string() }) }),
]);

const ResponseFormat = z.discriminatedUnion("type", [
  z.object({ type: z.literal("text") }),
  z.object({ type: z.literal("json_object") }),
  z.object({
    type: z.literal("json_schema"),
    json_schema: z.object({ name: z.string(), description: z.string().nullish(), schema: JsonObject.nullish(), strict: z.boolean().nullish() }),
  }),
]);

export const ChatRequest = z.object({
  model: z.string(),
  messages: z.array(Message).min(1),
  tools: z.array(Tool).nullish(),
  tool_choice: ToolChoice.nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  response_format: ResponseFormat.nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().nullish() }).nullish(),
  max_tokens: MaxTokens,
  max_completion_tokens: MaxTokens,
  stop: z.union([z.string(), StopSequences]).nullish(),
  n: z.literal(1, { error: "only n = 1 is supported" }).nullish(),
  temperature: Temperature(2),
  top_p: Probability,
  top_k: TopK,
  min_p: Probability,
  presence_penalty: Penalty,
  frequency_penalty: Penalty,
  repetition_penalty: RepetitionPenalty,
  logit_bias: LogitBiasMap.nullish(),
  seed: Seed,
  logprobs: z.boolean().nullish(),
  top_logprobs: TopLogprobs,
  reasoning_effort: z.enum(EFFORTS).nullish(),
  // vLLM's way to switch a Qwen model's thinking off; Qwen users' clients send it.
  chat_template_kwargs: z.object({ enable_thinking: z.boolean().optional() }).nullish(),
});

export type ChatRequest = z.infer<typeof ChatRequest>;
