// Where structured output plugs into every surface. OpenAI chat `response_format`, Responses `text.format` and
// Anthropic `output_config.format` all arrive here as the IR's ResponseFormat.
//
// Constrained decoding (issue 9) is not in the engine yet, and a JSON schema that is silently not enforced is worse
// than a refusal: agents would parse whatever the model wrote. So anything but plain text is a clear 400 for now;
// once the grammar lands, this function returns the format and the converters already pass it to the Conversation.
import type { ResponseFormat } from "../chat/ir.ts";
import { invalidRequest } from "./errors.ts";

export function acceptResponseFormat(format: ResponseFormat, param: string): ResponseFormat {
  if (format.type === "text") return format;
  throw invalidRequest(`${format.type} output is not supported yet: this server cannot constrain output to a schema`, param, "unsupported_response_format");
}
