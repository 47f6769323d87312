// Turns the text of a Qwen XML tool-call parameter into a JSON value, as the tool's JSON schema says it should be.
// The model writes every value as text (`<parameter=days>\n3\n</parameter>`); strings stay exactly as written,
// numbers/integers/booleans/null/objects/arrays are parsed. Qwen3.5's template renders booleans and None from
// history as Python prints them, so "True"/"False"/"None" are accepted too. anyOf/oneOf/type lists allow each type
// in the order: null, boolean, integer, number, object, array, then string.
import type { JsonSchema } from "./ir.ts";

type JsonType = "string" | "number" | "integer" | "boolean" | "null" | "object" | "array";

// The JSON types a schema allows; undefined when it does not say (no schema, {}, or only $ref/enum/const).
export function schemaTypes(schema: JsonSchema | undefined): Set<JsonType> | undefined {
  if (!schema || typeof schema !== "object") return undefined;
  const out = new Set<JsonType>();
  const t = schema.type;
  if (typeof t === "string") out.add(t as JsonType);
  else if (Array.isArray(t)) for (const x of t) if (typeof x === "string") out.add(x as JsonType);
  for (const key of ["anyOf", "oneOf", "allOf"] as const) {
    const list = schema[key];
    if (!Array.isArray(list)) continue;
    for (const sub of list) {
      const s = schemaTypes(sub as JsonSchema);
      if (!s) return undefined; // an alternative that allows anything
      for (const x of s) out.add(x);
    }
  }
  if (out.size === 0 && Array.isArray(schema.enum)) {
    for (const v of schema.enum) out.add(v === null ? "null" : Array.isArray(v) ? "array" : (typeof v as JsonType));
  }
  return out.size ? out : undefined;
}

// True when the value is text whatever the model writes: the schema allows strings and nothing else.
export function isStringOnly(schema: JsonSchema | undefined): boolean {
  const t = schemaTypes(schema);
  return t !== undefined && t.size === 1 && t.has("string");
}

function parseJson(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}

// The value of a parameter's text under its schema. `ok` is false when the text fits none of the allowed types;
// the value is then the text itself (never lost) and the caller logs it.
export function coerceParameter(text: string, schema: JsonSchema | undefined): { value: unknown; ok: boolean } {
  const types = schemaTypes(schema);
  if (types === undefined) {
    // No type information: JSON if it parses as a non-string JSON value, else the text.
    if (schema === undefined) return { value: text, ok: true };
    const j = parseJson(text.trim());
    return j.ok && typeof j.value !== "string" ? { value: j.value, ok: true } : { value: text, ok: true };
  }
  const t = text.trim();
  if (types.has("null") && (t === "null" || t === "None")) return { value: null, ok: true };
  if (types.has("boolean")) {
    if (t === "true" || t === "True") return { value: true, ok: true };
    if (t === "false" || t === "False") return { value: false, ok: true };
  }
  if (types.has("integer") && /^-?\d+$/.test(t)) {
    const n = Number(t);
    if (Number.isSafeInteger(n)) return { value: n, ok: true };
  }
  if ((types.has("number") || types.has("integer")) && /^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(t)) {
    const n = Number(t);
    if (Number.isFinite(n) && (types.has("number") || Number.isInteger(n))) return { value: n, ok: true };
  }
  if (types.has("object") || types.has("array")) {
    const j = parseJson(t);
    if (j.ok && j.value !== null && typeof j.value === "object") {
      const isArray = Array.isArray(j.value);
      if ((isArray && types.has("array")) || (!isArray && types.has("object"))) return { value: j.value, ok: true };
    }
  }
  if (types.has("string")) return { value: text, ok: true };
  return { value: text, ok: false };
}
