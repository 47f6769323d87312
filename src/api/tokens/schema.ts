// POST /tokenize, /detokenize and /apply-template: the served tokenizer and chat template, for clients that count or
// inspect tokens themselves. `model` may be left out: a server serves one model.
import { z } from "zod";
import { ChatRequest } from "../openai-chat/schema.ts";

const Model = z.string().nullish();

export const TokenizeRequest = z.object({
  model: Model,
  text: z.string(),
  // true: added-token strings in the text (<|im_start|>, <think>, …) are those tokens, as Hugging Face tokenizers
  // read text; false: they are text, as in a client's message. Qwen tokenizers add no BOS/EOS either way.
  add_special_tokens: z.boolean().nullish(),
  with_pieces: z.boolean().nullish(), // also each token's text and bytes
});

export const DetokenizeRequest = z.object({
  model: Model,
  tokens: z.array(z.number().int().min(0)),
  skip_special_tokens: z.boolean().nullish(),
});

// A Chat Completions request (what it would run is what is shown), with `enable_thinking` as a chat template takes it.
// Built from its fields: zod refuses to extend an object schema that has refinements.
export const ApplyTemplateRequest = z.object({ ...ChatRequest.shape, model: Model, enable_thinking: z.boolean().nullish() });

export type TokenizeRequest = z.infer<typeof TokenizeRequest>;
export type DetokenizeRequest = z.infer<typeof DetokenizeRequest>;
export type ApplyTemplateRequest = z.infer<typeof ApplyTemplateRequest>;
