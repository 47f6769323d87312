// POST /v1/responses: the request as OpenAI documents it and Codex sends it.
//
// Items and tools of kinds Splash does not run (web_search, file_search, computer use, MCP, item references, …)
// are accepted and dropped, as Codex expects of a provider; custom (freeform) tools are offered to the model as a
// function with one string parameter, and local_shell calls in the history are kept as ordinary tool calls.
import { z } from "zod";
import { EFFORTS } from "../options.ts";
import { Ignored, JsonObject, MaxTokens, Penalty, Probability, RepetitionPenalty, Seed, Temperature, TopK, TopLogprobs, tagUnknown } from "../schema-common.ts";

const InputText = z.object({ type: z.literal("input_text"), text: z.string() });
const OutputText = z.object({ type: z.literal("output_text"), text: z.string() });
const InputImage = z.object({ type: z.literal("input_image"), image_url: z.string().nullish(), file_id: z.string().nullish(), detail: z.string().nullish() });
const ContentPart = z.discriminatedUnion("type", [
  InputText,
  OutputText,
  InputImage,
  z.object({ type: z.literal("refusal"), refusal: z.string() }),
  z.object({ type: z.literal("input_file") }),
  z.object({ type: z.literal("input_audio") }),
]);
export type ResponsesContentPart = z.infer<typeof ContentPart>;

const MessageItem = z.object({
  type: z.literal("message"),
  role: z.enum(["user", "system", "developer", "assistant"]),
  content: z.union([z.string(), z.array(ContentPart)]),
});

const ToolOutput = z.union([z.string(), z.array(ContentPart)]);

const KNOWN_ITEMS = ["message", "function_call", "function_call_output", "reasoning", "custom_tool_call", "custom_tool_call_output", "local_shell_call", "local_shell_call_output"];

export const InputItem = z.preprocess(
  tagUnknown(KNOWN_ITEMS, (item) => (item.role !== undefined ? "message" : undefined)),
  z.discriminatedUnion("type", [
    MessageItem,
    z.object({ type: z.literal("function_call"), call_id: z.string(), name: z.string(), arguments: z.string() }),
    z.object({ type: z.literal("function_call_output"), call_id: z.string(), output: ToolOutput }),
    z.object({
      type: z.literal("reasoning"),
      summary: z.array(z.object({ text: z.string() })).nullish(),
      content: z.array(z.object({ text: z.string() })).nullish(),
      encrypted_content: z.string().nullish(),
    }),
    z.object({ type: z.literal("custom_tool_call"), call_id: z.string(), name: z.string(), input: z.string() }),
    z.object({ type: z.literal("custom_tool_call_output"), call_id: z.string(), output: ToolOutput }),
    z.object({ type: z.literal("local_shell_call"), call_id: z.string(), action: JsonObject }),
    z.object({ type: z.literal("local_shell_call_output"), call_id: z.string().nullish(), id: z.string().nullish(), output: z.string() }),
    Ignored,
  ]),
);
export type InputItem = z.infer<typeof InputItem>;

const KNOWN_TOOLS = ["function", "custom"];

const Tool = z.preprocess(
  tagUnknown(KNOWN_TOOLS),
  z.discriminatedUnion("type", [
    z.object({ type: z.literal("function"), name: z.string().min(1), description: z.string().nullish(), parameters: JsonObject.nullish(), strict: z.boolean().nullish() }),
    z.object({ type: z.literal("custom"), name: z.string().min(1), description: z.string().nullish() }),
    Ignored,
  ]),
);

// Other forced choices (hosted tools, allowed_tools subsets) fall back to "auto".
const ToolChoice = z.preprocess(
  (v) => (v !== null && typeof v === "object" && "type" in v && v.type !== "function" && v.type !== "custom" ? "auto" : v),
  z.union([z.enum(["none", "auto", "required"]), z.object({ type: z.enum(["function", "custom"]), name: z.string() })]),
);

export const TextFormat = z.discriminatedUnion("type", [
  z.object({ type: z.literal("text") }),
  z.object({ type: z.literal("json_object") }),
  z.object({ type: z.literal("json_schema"), name: z.string(), schema: JsonObject, strict: z.boolean().nullish(), description: z.string().nullish() }),
]);

export const ResponsesRequest = z.object({
  model: z.string(),
  input: z.union([z.string(), z.array(InputItem)]),
  instructions: z.string().nullish(),
  tools: z.array(Tool).nullish(),
  tool_choice: ToolChoice.nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  text: z.object({ format: TextFormat.nullish(), verbosity: z.string().nullish() }).nullish(),
  reasoning: z.object({ effort: z.enum(EFFORTS).nullish(), summary: z.string().nullish() }).nullish(),
  store: z.boolean().nullish(),
  previous_response_id: z.string().nullish(),
  stream: z.boolean().nullish(),
  background: z.literal(false, { error: "background responses are not supported" }).nullish(),
  max_output_tokens: MaxTokens,
  temperature: Temperature(2),
  top_p: Probability,
  top_k: TopK,
  min_p: Probability,
  presence_penalty: Penalty,
  frequency_penalty: Penalty,
  repetition_penalty: RepetitionPenalty,
  seed: Seed,
  top_logprobs: TopLogprobs,
  metadata: z.record(z.string(), z.unknown()).nullish(),
});

export type ResponsesRequest = z.infer<typeof ResponsesRequest>;
