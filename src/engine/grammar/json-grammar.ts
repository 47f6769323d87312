// A compiled schema (schema.ts) → EBNF for one JSON value, written the way Python's json.dumps writes it by default:
// one line, ", " between items and ": " after keys, which is also how the chat template's tojson renders non-string
// tool arguments. Fixed whitespace keeps the model from looping on whitespace and keeps masks cheap.
import * as cs from "./charset.ts";
import { alt, charClass, lit, type Rules } from "./ebnf.ts";
import { integerEbnf, numberEbnf } from "./numbers.ts";
import { regexToEbnf } from "./regex.ts";
import type { CompiledSchema, Node, Property } from "./schema.ts";

// JSON text of a value with json.dumps' default separators.
export function dumps(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(dumps).join(", ")}]`;
  if (typeof v === "object" && v !== null) {
    return `{${Object.entries(v).map(([k, x]) => `${JSON.stringify(k)}: ${dumps(x)}`).join(", ")}}`;
  }
  return JSON.stringify(v);
}

// Joins sequence parts, dropping empty ones.
export const cat = (...parts: string[]): string => {
  const kept = parts.filter((p) => p !== '""' && p !== "");
  return kept.length === 0 ? '""' : kept.join(" ");
};

const STRING_CHAR = cs.minus(cs.ANY, cs.union([[0, 0x1f]], cs.chars(0x22, 0x5c)));

export class JsonWriter {
  private readonly defNames = new Map<string, string>();

  constructor(
    private readonly rules: Rules,
    private readonly schema: CompiledSchema,
  ) {}

  // EBNF for a JSON value matching the node.
  value(node: Node): string {
    switch (node.kind) {
      case "any":
        return this.builtin("json_value");
      case "values":
        return alt(node.values.map((v) => lit(dumps(v))));
      case "null":
        return lit("null");
      case "boolean":
        return '("true" | "false")';
      case "integer":
        return node.min || node.max ? this.rules.add("integer", integerEbnf(node.min, node.max)) : this.builtin("json_integer");
      case "number":
        return node.min || node.max ? this.rules.add("number", numberEbnf(this.rules, node.min, node.max)) : this.builtin("json_number");
      case "string":
        return this.string(node);
      case "array":
        return this.array(node);
      case "object":
        return this.object(node);
      case "union":
        return alt(node.options.map((o) => this.value(o)));
      case "ref":
        return this.ref(node.id);
    }
  }

  private ref(id: string): string {
    let name = this.defNames.get(id);
    if (!name) {
      name = this.rules.reserve(`def_${id.split("/").pop() || "root"}`);
      this.defNames.set(id, name);
      this.rules.define(name, this.value(this.schema.defs.get(id)!));
    }
    return name;
  }

  // Length bounds are not written: the constraint counts them (bounds.ts).
  private string(node: Extract<Node, { kind: "string" }>): string {
    if (!node.regex) return this.builtin("json_string");
    const body = regexToEbnf(node.regex, "json");
    if (body === null) throw new Error("pattern with an empty language reached the grammar writer");
    return this.rules.add("pattern", cat('"\\""', body, '"\\""'));
  }

  // Item counts are not written (bounds.ts counts them): after the prefix items, which may stop anywhere, any
  // number of further items.
  private array(node: Extract<Node, { kind: "array" }>): string {
    const { prefix, items } = node;
    const item = items ? this.value(items) : null;
    const rest = item ? cat(`(", " ${item})*`, '"]"') : '"]"';
    let tail = rest; // after prefix item i (from the last back to the first)
    for (let i = prefix.length - 1; i >= 1; i--) tail = this.rules.add("array_tail", `"]" | ${cat('", "', this.value(prefix[i]!), tail)}`);
    const first = prefix.length ? cat(this.value(prefix[0]!), tail) : item ? cat(item, rest) : null;
    return this.rules.add("array", `"[" ${first ? `("]" | ${first})` : '"]"'}`);
  }

  private object(node: Extract<Node, { kind: "object" }>): string {
    const { properties, additional } = node;
    const extra = additional ? this.value(additional) : null;
    const extraKey = properties.length ? this.keyExcluding(properties.map((p) => p.name)) : this.builtin("json_string");
    const member = (p: Property) => cat(lit(`${JSON.stringify(p.name)}: `), this.value(p.node));
    const n = properties.length;
    // after[i]: something was written; properties i.. may follow (in order), then extra members.
    // first[i]: nothing written yet.
    const after: string[] = [];
    const first: string[] = [];
    after[n] = extra ? `(", " ${extraKey} ": " ${extra})*` : '""';
    first[n] = extra ? `(${extraKey} ": " ${extra} ${after[n]})?` : '""';
    for (let i = n - 1; i >= 0; i--) {
      const p = properties[i]!;
      const withIt = cat(member(p), after[i + 1]!);
      const a = cat('", "', withIt);
      after[i] = this.rules.add("object_after", p.required ? a : `(${a}) | ${after[i + 1]}`);
      first[i] = this.rules.add("object_first", p.required ? withIt : `(${withIt}) | ${first[i + 1]}`);
    }
    return this.rules.add("object", cat('"{"', first[0]!, '"}"'));
  }

  // A key (a JSON string without escapes) that is none of `names`: a trie of the names whose ends are not final.
  private keyExcluding(names: string[]): string {
    type Trie = { end: boolean; next: Map<number, Trie> };
    const root: Trie = { end: false, next: new Map() };
    for (const name of names) {
      const cps = [...name].map((c) => c.codePointAt(0)!);
      if (cps.some((c) => !cs.has(STRING_CHAR, c))) continue; // has escapes: an escape-free key never equals it
      let t = root;
      for (const c of cps) {
        if (!t.next.has(c)) t.next.set(c, { end: false, next: new Map() });
        t = t.next.get(c)!;
      }
      t.end = true;
    }
    const free = this.rules.add("key_free", `${charClass(STRING_CHAR)}* "\\""`);
    const state = (t: Trie): string => {
      const options: string[] = [];
      if (!t.end) options.push('"\\""');
      const other = cs.minus(STRING_CHAR, cs.chars(...t.next.keys()));
      if (!cs.isEmpty(other)) options.push(`${charClass(other)} ${free}`);
      for (const [c, child] of t.next) options.push(`${lit(String.fromCodePoint(c))} ${state(child)}`);
      return this.rules.add("key", options.join(" | "));
    };
    return this.rules.add("key", `"\\"" ${state(root)}`);
  }

  private builtin(name: string): string {
    if (this.rules.builtins.has(name)) return this.rules.builtins.get(name)!;
    const body = {
      json_value: () => `json_object | json_array | json_string | json_number | "true" | "false" | "null"`,
      json_object: () => `"{" (json_string ": " json_value (", " json_string ": " json_value)*)? "}"`,
      json_array: () => `"[" (json_value (", " json_value)*)? "]"`,
      // A class star, then an escape or the end (see starOf in ebnf.ts for why not `(char | escape)*`).
      json_string: () => `"\\"" json_string_rest`,
      json_string_rest: () => `${charClass(STRING_CHAR)}* ("\\"" | "\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F]{4}) json_string_rest)`,
      json_number: () => `"-"? ("0" | [1-9] [0-9]{0,17}) ("." [0-9]+)? ([eE] [+-]? [0-9]{1,2})?`,
      json_integer: () => `"0" | "-"? [1-9] [0-9]{0,17}`,
    }[name];
    if (!body) throw new Error(`unknown builtin rule ${name}`);
    // The builtins refer to each other by these fixed names, which nothing else reserves.
    const ruleName = this.rules.reserve(name);
    if (ruleName !== name) throw new Error(`builtin rule name ${name} is taken`);
    this.rules.builtins.set(name, ruleName);
    // The json_value family refers to its members by their builtin names: define those too.
    if (name === "json_value") for (const dep of ["json_object", "json_array", "json_string", "json_number"]) this.builtin(dep);
    if (name === "json_string") this.builtin("json_string_rest");
    if (name === "json_object" || name === "json_array") this.builtin("json_value");
    this.rules.define(ruleName, body());
    return ruleName;
  }
}

