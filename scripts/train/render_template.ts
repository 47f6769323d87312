// Renders the cases given on stdin (JSON array of {messages, tools?, add_generation_prompt?,
// enable_thinking?}) with @huggingface/jinja, as the engine does, and prints the results as a JSON array.
import { Template } from "@huggingface/jinja";

const template = new Template(await Bun.file(`${import.meta.dir}/chat_template.jinja`).text());
const cases = (await Bun.stdin.json()) as Record<string, unknown>[];
console.log(JSON.stringify(cases.map((c) => template.render({ tools: null, ...c }))));
