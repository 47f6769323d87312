// JSON Schema → a small typed tree (Node) that json-grammar.ts writes as EBNF. This walk is also the validator: a
// keyword or value the grammar cannot enforce is a SchemaError naming the keyword and its JSON-pointer path (the
// API answers 400), never a silently unconstrained output. Annotations are accepted and ignored.
//
// Where JSON Schema allows more than the grammar generates, the grammar generates a valid subset: objects with
// `properties` and no `additionalProperties` get only the declared properties, in declared order; `prefixItems`
// without `items` gets no further items; a pattern is matched whole. Every output still validates.
import { FORMATS } from "./formats.ts";
import { integerEbnf, numberEbnf, Unsatisfiable, type Bound } from "./numbers.ts";
import { largestRepeat, matchLengths, MAX_REPEAT, parseRegex, RegexError, regexToEbnf, type Regex } from "./regex.ts";
import { Rules } from "./ebnf.ts";
import { feasible, lengthDfa, LengthDfaError, type LengthDfa } from "./length-dfa.ts";

export type Property = { name: string; node: Node; required: boolean };
export type Node =
  | { kind: "any" }
  | { kind: "values"; values: unknown[] } // enum / const
  | { kind: "null" }
  | { kind: "boolean" }
  | { kind: "integer"; min?: Bound; max?: Bound }
  | { kind: "number"; min?: Bound; max?: Bound }
  | { kind: "string"; minLength: number; maxLength?: number; regex?: Regex; pattern?: string; lengths?: LengthDfa } // lengths: the pattern's DFA, when counting needs its state
  | { kind: "array"; prefix: Node[]; items: Node | null; minItems: number; maxItems?: number }
  | { kind: "object"; properties: Property[]; additional: Node | null }
  | { kind: "union"; options: Node[]; path: string; keyword: string } // where the schema says anyOf/oneOf/type
  | { kind: "ref"; id: string };

export type CompiledSchema = { root: Node; defs: Map<string, Node> };

export class SchemaError extends Error {
  override name = "SchemaError";
  constructor(
    readonly reason: string,
    readonly path: string, // JSON pointer into the schema ("" = the root)
    readonly keyword?: string,
  ) {
    super(`${reason} (at ${path === "" ? "the schema root" : path})`);
  }
}

const ANNOTATIONS = new Set(["title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated", "readOnly", "writeOnly", "$defs", "definitions"]);
const SUPPORTED = new Set([
  "type", "enum", "const", "properties", "required", "additionalProperties", "items", "prefixItems", "minItems", "maxItems",
  "minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "anyOf", "oneOf",
  "allOf", "$ref", "propertyNames",
]);
const HINTS: Record<string, string> = {
  nullable: ' (OpenAPI); use "type": [..., "null"]',
  items: "",
  not: ": a grammar cannot exclude a sub-language",
  if: ": conditional schemas cannot be enforced by a grammar",
  multipleOf: ": a grammar cannot enforce divisibility",
  uniqueItems: ": a grammar cannot remember earlier items",
};
const TYPES = ["null", "boolean", "object", "array", "number", "string", "integer"] as const;
type TypeName = (typeof TYPES)[number];
const OBJECT_KEYS = ["properties", "required", "additionalProperties", "propertyNames"];
const ARRAY_KEYS = ["items", "prefixItems", "minItems", "maxItems"];
const STRING_KEYS = ["minLength", "maxLength", "pattern", "format"];
const NUMBER_KEYS = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"];
const MAX_DEPTH = 64;
// OpenAPI's numeric formats, which ajv-formats checks: the ranges they name.
const NUMBER_FORMATS: Record<string, { integer?: true; min?: Bound; max?: Bound }> = {
  int32: { integer: true, min: { value: -(2 ** 31), exclusive: false }, max: { value: 2 ** 31 - 1, exclusive: false } },
  int64: { integer: true },
  float: {},
  double: {},
};

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
const at = (path: string, ...keys: (string | number)[]) => path + keys.map((k) => `/${String(k).replace(/~/g, "~0").replace(/\//g, "~1")}`).join("");

// Compiles a schema (already parsed JSON) or throws SchemaError.
export function compileSchema(schema: unknown): CompiledSchema {
  const c = new Compiler(schema);
  return { root: c.node(schema, "", 0), defs: c.defs };
}

class Compiler {
  readonly defs = new Map<string, Node>();
  constructor(private readonly document: unknown) {}

  node(schema: unknown, path: string, depth: number): Node {
    if (depth > MAX_DEPTH) throw new SchemaError(`schema nested deeper than ${MAX_DEPTH} levels`, path);
    const s = this.flatten(schema, path, new Set());
    if (s === true) return { kind: "any" };
    if (s === false) throw new SchemaError("the schema `false` accepts no value", path);
    if (typeof s.$ref === "string") return this.ref(s.$ref, path, depth);
    if (s.anyOf !== undefined || s.oneOf !== undefined) return this.union(s, path, depth);
    const base = this.typed(s, path, depth);
    if (s.const === undefined && s.enum === undefined) return base;
    const candidates = s.const !== undefined ? [s.const] : this.array(s.enum, at(path, "enum"), "enum");
    const values = candidates.filter((v) => satisfies(base, v, this.defs));
    if (values.length === 0) throw new SchemaError(`no value of "${s.const !== undefined ? "const" : "enum"}" satisfies the rest of the schema`, path, s.const !== undefined ? "const" : "enum");
    return { kind: "values", values };
  }

  // Resolves allOf and $ref-with-siblings by merging: the result has neither (a bare $ref may remain).
  private flatten(schema: unknown, path: string, seen: Set<string>): Obj | boolean {
    if (typeof schema === "boolean") return schema;
    if (!isObj(schema)) throw new SchemaError("a schema must be an object or a boolean", path);
    checkKeywords(schema, path);
    const { allOf, ...rest } = schema;
    const members: unknown[] = allOf === undefined ? [] : this.array(allOf, at(path, "allOf"), "allOf");
    const hasSiblings = Object.keys(rest).some((k) => k !== "$ref" && !ANNOTATIONS.has(k));
    const parts: (Obj | boolean)[] = [];
    if (typeof rest.$ref === "string" && (hasSiblings || members.length > 0)) {
      parts.push(this.resolveFlat(rest.$ref, path, seen));
      delete rest.$ref;
    }
    if (members.length === 0 && parts.length === 0) return rest;
    parts.push(rest);
    members.forEach((m, i) => {
      const f = this.flatten(m, at(path, "allOf", i), seen);
      parts.push(isObj(f) && typeof f.$ref === "string" ? this.resolveFlat(f.$ref, at(path, "allOf", i), seen) : f);
    });
    return parts.reduce((a, b) => merge(a, b, path));
  }

  private resolveFlat(ref: string, path: string, seen: Set<string>): Obj | boolean {
    if (seen.has(ref)) throw new SchemaError(`$ref "${ref}" refers to itself through allOf/$ref only`, path, "$ref");
    const target = this.flatten(resolve(this.document, ref, path), ref.slice(1), new Set([...seen, ref]));
    return isObj(target) && typeof target.$ref === "string" ? this.resolveFlat(target.$ref, path, new Set([...seen, ref])) : target;
  }

  private ref(ref: string, path: string, depth: number): Node {
    if (!this.defs.has(ref)) {
      const target = resolve(this.document, ref, path);
      this.defs.set(ref, { kind: "any" }); // placeholder while the target compiles (recursion)
      this.defs.set(ref, this.node(target, ref.slice(1), depth + 1));
    }
    return { kind: "ref", id: ref };
  }

  private union(s: Obj, path: string, depth: number): Node {
    if (s.anyOf !== undefined && s.oneOf !== undefined) throw new SchemaError('"anyOf" and "oneOf" together are not supported', path, "oneOf");
    const keyword = s.anyOf !== undefined ? "anyOf" : "oneOf";
    const { anyOf: _a, oneOf: _o, ...siblings } = s;
    const hasSiblings = Object.keys(siblings).some((k) => !ANNOTATIONS.has(k));
    const members = this.array(s[keyword], at(path, keyword), keyword);
    if (members.length === 0) throw new SchemaError(`"${keyword}" must not be empty`, at(path, keyword), keyword);
    const options = members.map((m, i) => {
      const p = at(path, keyword, i);
      if (!hasSiblings) return this.node(m, p, depth + 1);
      const f = this.flatten(m, p, new Set());
      return this.node(merge(siblings, isObj(f) && typeof f.$ref === "string" ? this.resolveFlat(f.$ref, p, new Set()) : f, p), p, depth + 1);
    });
    if (keyword === "oneOf") {
      for (let i = 0; i < options.length; i++) {
        for (let j = i + 1; j < options.length; j++) {
          if (!disjoint(options[i]!, options[j]!, this.defs)) {
            throw new SchemaError(
              `oneOf options ${i} and ${j} may both match one value, which oneOf forbids; use anyOf, or make them exclusive (different types, or a required property with different const values)`,
              at(path, "oneOf"),
              "oneOf",
            );
          }
        }
      }
    }
    return options.length === 1 ? options[0]! : { kind: "union", options, path: at(path, keyword), keyword };
  }

  private typed(s: Obj, path: string, depth: number): Node {
    let types: (TypeName | "any")[];
    if (s.type === undefined) {
      types = [];
      if (OBJECT_KEYS.some((k) => k in s)) types.push("object");
      if (ARRAY_KEYS.some((k) => k in s)) types.push("array");
      if (STRING_KEYS.some((k) => k in s)) types.push("string");
      if (NUMBER_KEYS.some((k) => k in s)) types.push("number");
      if (types.length === 0) types.push("any");
    } else {
      const list = Array.isArray(s.type) ? s.type : [s.type];
      if (list.length === 0) throw new SchemaError('"type" must not be an empty array', at(path, "type"), "type");
      types = list.map((t) => {
        if (!TYPES.includes(t as TypeName)) throw new SchemaError(`unknown type ${JSON.stringify(t)} (expected one of ${TYPES.join(", ")})`, at(path, "type"), "type");
        return t as TypeName;
      });
      if (types.includes("number")) types = types.filter((t) => t !== "integer");
    }
    const nodes = [...new Set(types)].map((t) => this.build(t, s, path, depth));
    return nodes.length === 1 ? nodes[0]! : { kind: "union", options: nodes, path: at(path, "type"), keyword: "type" };
  }

  private build(type: TypeName | "any", s: Obj, path: string, depth: number): Node {
    switch (type) {
      case "any":
        return { kind: "any" };
      case "null":
      case "boolean":
        return { kind: type };
      case "integer":
      case "number": {
        const format = s.format === undefined ? undefined : NUMBER_FORMATS[String(s.format)];
        if (s.format !== undefined && !format) {
          throw new SchemaError(`format ${JSON.stringify(s.format)} is not supported for numbers (supported: ${Object.keys(NUMBER_FORMATS).join(", ")})`, at(path, "format"), "format");
        }
        const min = tighter(tighter(this.bound(s, path, "minimum", false), this.bound(s, path, "exclusiveMinimum", true), 1), format?.min, 1);
        const max = tighter(tighter(this.bound(s, path, "maximum", false), this.bound(s, path, "exclusiveMaximum", true), -1), format?.max, -1);
        const kind = format?.integer ? "integer" : type;
        try {
          if (kind === "integer") integerEbnf(min, max);
          else numberEbnf(new Rules(), min, max);
        } catch (e) {
          if (e instanceof Unsatisfiable) throw new SchemaError(e.message, path, "minimum");
          throw e;
        }
        return { kind, ...(min && { min }), ...(max && { max }) };
      }
      case "string":
        return this.string(s, path);
      case "array":
        return this.arrayNode(s, path, depth);
      case "object":
        return this.object(s, path, depth);
    }
  }

  private string(s: Obj, path: string): Node {
    const minLength = this.count(s, path, "minLength") ?? 0;
    const maxLength = this.count(s, path, "maxLength");
    if (maxLength !== undefined && minLength > maxLength) throw new SchemaError("minLength is greater than maxLength", path, "minLength");
    if (s.pattern !== undefined && s.format !== undefined) throw new SchemaError('"pattern" together with "format" is not supported', path, "format");
    let pattern: string | undefined;
    let keyword = "pattern";
    if (s.format !== undefined) {
      keyword = "format";
      if (typeof s.format !== "string" || !Object.hasOwn(FORMATS, s.format)) {
        throw new SchemaError(`format ${JSON.stringify(s.format)} is not supported (supported: ${Object.keys(FORMATS).join(", ")})`, at(path, "format"), "format");
      }
      pattern = FORMATS[s.format] ?? undefined;
    } else if (s.pattern !== undefined) {
      if (typeof s.pattern !== "string") throw new SchemaError('"pattern" must be a string', at(path, "pattern"), "pattern");
      pattern = s.pattern;
    }
    if (pattern === undefined) return { kind: "string", minLength, ...(maxLength !== undefined && { maxLength }) };
    let regex: Regex;
    try {
      regex = parseRegex(pattern);
    } catch (e) {
      if (e instanceof RegexError) throw new SchemaError(`pattern: ${e.message}`, at(path, keyword), keyword);
      throw e;
    }
    if (regexToEbnf(regex, "json") === null) {
      throw new SchemaError("pattern: every match needs characters the grammar cannot write (large non-ASCII ranges)", at(path, keyword), keyword);
    }
    const large = largestRepeat(regex) > MAX_REPEAT;
    const lengthKey = s.minLength !== undefined ? "minLength" : "maxLength";
    // Bounds every match already keeps (a uuid's maxLength 36, a five-digit pattern's minLength 5) say nothing more.
    const lengths = matchLengths(regex);
    if (Math.max(minLength, lengths.min) > Math.min(maxLength ?? Infinity, lengths.max)) {
      throw new SchemaError(`no string matching "${keyword}" has a length within minLength/maxLength`, path, lengthKey);
    }
    if (minLength <= lengths.min && (maxLength ?? Infinity) >= lengths.max && !large) return { kind: "string", minLength: 0, regex, pattern };
    const counted = countedPattern(regex, minLength, maxLength);
    if (counted === "unsatisfiable") throw new SchemaError(`no string matching "${keyword}" has a length within minLength/maxLength`, path, lengthKey);
    if (!counted && !large) {
      // Any other shape: the count follows the pattern's state and keeps room for the shortest way to close it.
      let dfa: LengthDfa;
      try {
        dfa = lengthDfa(regex, minLength, maxLength ?? Infinity);
      } catch (e) {
        if (e instanceof LengthDfaError) throw new SchemaError(`minLength/maxLength together with this ${keyword}: ${e.message}`, path, lengthKey);
        throw e;
      }
      if (!feasible(dfa, 0, 0)) throw new SchemaError(`no string matching "${keyword}" has a length within minLength/maxLength`, path, lengthKey);
      return { kind: "string", minLength, ...(maxLength !== undefined && { maxLength }), regex, pattern, lengths: dfa };
    }
    if (!counted || largestRepeat(counted.regex) > MAX_REPEAT) {
      throw new SchemaError(
        `${keyword}: a repetition bound above ${MAX_REPEAT} is supported on a repeated character class that ends the pattern after fixed characters (such as ^[a-z][a-z0-9_]{0,9999}$)`,
        at(path, keyword),
        keyword,
      );
    }
    return { kind: "string", ...counted, pattern };
  }

  private arrayNode(s: Obj, path: string, depth: number): Node {
    if (Array.isArray(s.items)) throw new SchemaError('"items" as an array (draft 7 tuples) is not supported; use "prefixItems"', at(path, "items"), "items");
    if (s.uniqueItems === true) throw new SchemaError(`unsupported keyword "uniqueItems"${HINTS.uniqueItems}`, at(path, "uniqueItems"), "uniqueItems");
    const prefix = s.prefixItems === undefined ? [] : this.array(s.prefixItems, at(path, "prefixItems"), "prefixItems").map((p, i) => this.node(p, at(path, "prefixItems", i), depth + 1));
    const items = s.items === undefined ? (prefix.length ? null : { kind: "any" as const }) : s.items === false ? null : this.node(s.items, at(path, "items"), depth + 1);
    const minItems = this.count(s, path, "minItems") ?? 0;
    const maxItems = this.count(s, path, "maxItems");
    if (maxItems !== undefined && minItems > maxItems) throw new SchemaError("minItems is greater than maxItems", path, "minItems");
    if (items === null && minItems > prefix.length) throw new SchemaError("minItems is more than the items the schema allows", path, "minItems");
    return { kind: "array", prefix, items, minItems, ...(maxItems !== undefined && { maxItems }) };
  }

  private object(s: Obj, path: string, depth: number): Node {
    const props = s.properties === undefined ? {} : s.properties;
    if (!isObj(props)) throw new SchemaError('"properties" must be an object', at(path, "properties"), "properties");
    const required = s.required === undefined ? [] : this.array(s.required, at(path, "required"), "required");
    for (const r of required) if (typeof r !== "string") throw new SchemaError('"required" must list strings', at(path, "required"), "required");
    // Keys are strings already: a propertyNames that accepts every string (what zod writes for records) says nothing.
    const names = s.propertyNames;
    if (names !== undefined && names !== true && !(isObj(names) && Object.keys(names).every((k) => ANNOTATIONS.has(k) || (k === "type" && names.type === "string")))) {
      throw new SchemaError('"propertyNames" is supported only when it accepts every string', at(path, "propertyNames"), "propertyNames");
    }
    const ap = s.additionalProperties;
    let additional: Node | null;
    if (ap === undefined) additional = Object.keys(props).length ? null : { kind: "any" };
    else if (ap === false) additional = null;
    else additional = this.node(ap, at(path, "additionalProperties"), depth + 1);
    const properties: Property[] = Object.entries(props).map(([name, p]) => ({
      name,
      node: this.node(p, at(path, "properties", name), depth + 1),
      required: required.includes(name),
    }));
    for (const name of new Set(required as string[])) {
      if (Object.hasOwn(props, name)) continue;
      if (ap === false) throw new SchemaError(`required property "${name}" is not in "properties" and additionalProperties is false`, at(path, "required"), "required");
      properties.push({ name, node: additional ?? { kind: "any" }, required: true });
    }
    return { kind: "object", properties, additional };
  }

  private bound(s: Obj, path: string, key: string, exclusive: boolean): Bound | undefined {
    const v = s[key];
    if (v === undefined) return undefined;
    if (typeof v !== "number" || !Number.isFinite(v)) throw new SchemaError(`"${key}" must be a number`, at(path, key), key);
    return { value: v, exclusive };
  }

  private count(s: Obj, path: string, key: string): number | undefined {
    const v = s[key];
    if (v === undefined) return undefined;
    if (typeof v !== "number" || !Number.isInteger(v) || v < 0) throw new SchemaError(`"${key}" must be a non-negative integer`, at(path, key), key);
    return v;
  }

  private array(v: unknown, path: string, keyword: string): unknown[] {
    if (!Array.isArray(v)) throw new SchemaError(`"${keyword}" must be an array`, path, keyword);
    return v;
  }
}

// A pattern with length bounds, written so the constraint can count the length (bounds.ts) instead of the grammar:
// when every match is some fixed characters followed by a repeated character class, the string can close or grow by
// one class character at any length past the fixed part, so counting the total length never leads to a dead end. The
// class repetition is written unbounded and its own bounds join the length bounds. undefined: the pattern has
// another shape (the count then follows the pattern's state: length-dfa.ts).
function countedPattern(re: Regex, minLength: number, maxLength: number | undefined): { regex: Regex; minLength: number; maxLength?: number } | "unsatisfiable" | undefined {
  const items = re.t === "seq" ? re.items : [re];
  const last = items.at(-1);
  if (!last || last.t !== "rep" || last.item.t !== "set") return undefined;
  let fixed = 0;
  for (const item of items.slice(0, -1)) {
    if (item.t === "set") fixed++;
    else if (item.t === "rep" && item.item.t === "set" && item.min === item.max) fixed += item.min;
    else return undefined;
  }
  const min = Math.max(minLength, fixed + last.min);
  const max = Math.min(maxLength ?? Infinity, last.max === null ? Infinity : fixed + last.max);
  if (min > max) return "unsatisfiable";
  const regex: Regex = { t: "seq", items: [...items.slice(0, -1), { t: "rep", item: last.item, min: 0, max: null }] };
  return { regex, minLength: min, ...(max !== Infinity && { maxLength: max }) };
}

function checkKeywords(s: Obj, path: string): void {
  for (const k of Object.keys(s)) {
    if (ANNOTATIONS.has(k) || SUPPORTED.has(k) || (k === "uniqueItems" && s[k] === false)) continue;
    const hint = HINTS[k] ?? (k === "then" || k === "else" ? HINTS.if : "");
    throw new SchemaError(`unsupported keyword "${k}"${hint}`, at(path, k), k);
  }
}

function resolve(document: unknown, ref: string, path: string): unknown {
  if (ref !== "#" && !ref.startsWith("#/")) throw new SchemaError(`$ref "${ref}": only references inside the schema ("#/...") are supported`, at(path, "$ref"), "$ref");
  let cur = document;
  for (const raw of ref === "#" ? [] : ref.slice(2).split("/")) {
    const key = decodeURIComponent(raw).replace(/~1/g, "/").replace(/~0/g, "~");
    if (Array.isArray(cur) && /^\d+$/.test(key)) cur = cur[Number(key)];
    else if (isObj(cur) && Object.hasOwn(cur, key)) cur = cur[key];
    else throw new SchemaError(`$ref "${ref}" does not resolve`, at(path, "$ref"), "$ref");
  }
  return cur;
}

// ----- allOf: merging two schemas into one that accepts exactly what both accept (or an error) -----

function tighter(a: Bound | undefined, b: Bound | undefined, dir: 1 | -1): Bound | undefined {
  if (!a || !b) return a ?? b;
  if (a.value === b.value) return a.exclusive ? a : b;
  return (a.value - b.value) * dir > 0 ? a : b;
}

const canonical = (v: unknown): string =>
  isObj(v) ? `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(",")}}` : Array.isArray(v) ? `[${v.map(canonical).join(",")}]` : JSON.stringify(v);

function merge(a: Obj | boolean, b: Obj | boolean, path: string): Obj | boolean {
  if (a === true) return b;
  if (b === true) return a;
  if (a === false || b === false) throw new SchemaError("allOf includes the schema `false`, which accepts no value", path, "allOf");
  const out: Obj = { ...a };
  const aProps = isObj(a.properties) ? a.properties : {};
  const bProps = isObj(b.properties) ? b.properties : {};
  for (const [k, bv] of Object.entries(b)) {
    const av = a[k];
    if (ANNOTATIONS.has(k) || av === undefined || canonical(av) === canonical(bv)) {
      if (av === undefined) out[k] = bv;
      continue;
    }
    switch (k) {
      case "type": {
        const as = new Set((Array.isArray(av) ? av : [av]) as string[]);
        const bs = (Array.isArray(bv) ? bv : [bv]) as string[];
        const both = bs.flatMap((t) => (as.has(t) ? [t] : t === "integer" && as.has("number") ? ["integer"] : t === "number" && as.has("integer") ? ["integer"] : []));
        if (both.length === 0) throw new SchemaError("allOf members have no type in common", path, "allOf");
        out.type = [...new Set(both)];
        break;
      }
      case "required":
        out.required = [...new Set([...(av as unknown[]), ...(bv as unknown[])])];
        break;
      case "minimum": case "exclusiveMinimum": case "minLength": case "minItems":
        out[k] = Math.max(av as number, bv as number);
        break;
      case "maximum": case "exclusiveMaximum": case "maxLength": case "maxItems":
        out[k] = Math.min(av as number, bv as number);
        break;
      case "enum": {
        const keep = new Set((bv as unknown[]).map(canonical));
        out.enum = (av as unknown[]).filter((v) => keep.has(canonical(v)));
        break;
      }
      case "items": case "additionalProperties":
        out[k] = av === false || bv === false ? false : { allOf: [av, bv] };
        break;
      case "properties":
        break; // below, with additionalProperties in view
      default:
        throw new SchemaError(`allOf members with different "${k}" are not supported`, path, "allOf");
    }
  }
  if (a.properties !== undefined || b.properties !== undefined) {
    const props: Obj = Object.create(null) as Obj; // no prototype: a property may be named "__proto__"
    const only = (p: unknown, otherAp: unknown): unknown => (otherAp === undefined || otherAp === true ? p : otherAp === false ? undefined : { allOf: [p, otherAp] });
    for (const [name, p] of Object.entries(aProps)) {
      const v = Object.hasOwn(bProps, name) ? { allOf: [p, bProps[name]] } : only(p, b.properties !== undefined || b.additionalProperties !== undefined ? b.additionalProperties : true);
      if (v !== undefined) props[name] = v;
    }
    for (const [name, p] of Object.entries(bProps)) {
      if (Object.hasOwn(aProps, name)) continue;
      const v = only(p, a.additionalProperties);
      if (v !== undefined) props[name] = v;
    }
    for (const r of (out.required as string[] | undefined) ?? []) {
      if (!Object.hasOwn(props, r) && (a.additionalProperties === false || b.additionalProperties === false)) {
        throw new SchemaError(`allOf requires property "${r}" that another member's additionalProperties: false forbids`, path, "allOf");
      }
    }
    out.properties = props;
  }
  return out;
}

// ----- checks on the compiled tree -----

const jsonType = (v: unknown): string => (v === null ? "null" : Array.isArray(v) ? "array" : typeof v === "number" ? "number" : typeof v);

// Whether a JSON value matches a node (filters enum values; proves oneOf options exclusive).
export function satisfies(node: Node, v: unknown, defs: Map<string, Node>, depth = 0): boolean {
  if (depth > MAX_DEPTH) return false;
  switch (node.kind) {
    case "any":
      return true;
    case "values":
      return node.values.some((x) => canonical(x) === canonical(v));
    case "null":
      return v === null;
    case "boolean":
      return typeof v === "boolean";
    case "integer":
    case "number": {
      if (typeof v !== "number" || (node.kind === "integer" && !Number.isInteger(v))) return false;
      const { min, max } = node;
      return (!min || (min.exclusive ? v > min.value : v >= min.value)) && (!max || (max.exclusive ? v < max.value : v <= max.value));
    }
    case "string": {
      if (typeof v !== "string") return false;
      const n = [...v].length;
      return n >= node.minLength && (node.maxLength === undefined || n <= node.maxLength) && (node.pattern === undefined || new RegExp(node.pattern, "u").test(v));
    }
    case "array":
      if (!Array.isArray(v) || v.length < node.minItems || (node.maxItems !== undefined && v.length > node.maxItems)) return false;
      return v.every((x, i) => {
        const n = i < node.prefix.length ? node.prefix[i]! : node.items;
        return n !== null && satisfies(n, x, defs, depth + 1);
      });
    case "object": {
      if (!isObj(v)) return false;
      for (const p of node.properties) {
        if (Object.hasOwn(v, p.name) ? !satisfies(p.node, v[p.name], defs, depth + 1) : p.required) return false;
      }
      const declared = new Set(node.properties.map((p) => p.name));
      return Object.entries(v).every(([k, x]) => declared.has(k) || (node.additional !== null && satisfies(node.additional, x, defs, depth + 1)));
    }
    case "union":
      return node.options.some((o) => satisfies(o, v, defs, depth + 1));
    case "ref":
      return satisfies(defs.get(node.id)!, v, defs, depth + 1);
  }
}

function typesOf(node: Node, defs: Map<string, Node>, depth = 0): Set<string> {
  const all = new Set(["null", "boolean", "number", "string", "array", "object"]);
  if (depth > MAX_DEPTH) return all;
  switch (node.kind) {
    case "any":
      return all;
    case "values":
      return new Set(node.values.map(jsonType));
    case "integer":
      return new Set(["number"]);
    case "union":
      return new Set(node.options.flatMap((o) => [...typesOf(o, defs, depth + 1)]));
    case "ref":
      return typesOf(defs.get(node.id)!, defs, depth + 1);
    default:
      return new Set([node.kind]);
  }
}

// True only when no value can match both nodes (a sufficient check: different JSON types, disjoint constants, or
// objects that both require a property whose values are exclusive).
export function disjoint(a: Node, b: Node, defs: Map<string, Node>, depth = 0): boolean {
  if (depth > MAX_DEPTH) return false;
  const ta = typesOf(a, defs);
  if (![...typesOf(b, defs)].some((t) => ta.has(t))) return true;
  if (a.kind === "ref") return disjoint(defs.get(a.id)!, b, defs, depth + 1);
  if (b.kind === "ref") return disjoint(a, defs.get(b.id)!, defs, depth + 1);
  if (a.kind === "union") return a.options.every((o) => disjoint(o, b, defs, depth + 1));
  if (b.kind === "union") return b.options.every((o) => disjoint(a, o, defs, depth + 1));
  if (a.kind === "values") return a.values.every((v) => !satisfies(b, v, defs));
  if (b.kind === "values") return b.values.every((v) => !satisfies(a, v, defs));
  if (a.kind === "object" && b.kind === "object") {
    return a.properties.some((p) => p.required && b.properties.some((q) => q.required && q.name === p.name && disjoint(p.node, q.node, defs, depth + 1)));
  }
  return false;
}
