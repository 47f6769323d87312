// Makes @huggingface/jinja 0.5.11 (pinned exactly) print values the way Python's jinja2 does under transformers'
// apply_chat_template, so a chat template renders byte-for-byte as the model saw it in training. The library renders
// Qwen templates, but silently differs from Python in ways that change Qwen prompts (bun-stack.md, and measured
// side by side in test/unit/chat/template.test.ts):
//   1. str.strip/lstrip/rstrip(chars) ignore `chars` and trim whitespace (Qwen3's reasoning history);
//   2. booleans print true/false, also through |string and ~ (Python: True/False; Qwen3.5 tool arguments);
//   3. None prints nothing and |string on it fails (Python: "None");
//   4. floats print as JavaScript does (Python repr: 2.0, 1e-05, 1e+16), lists and dicts print as JSON (Python repr);
//   5. tojson differs from json.dumps for floats and sort_keys (transformers' tojson is json.dumps(ensure_ascii=False)).
// The library exports only Template/Environment/Interpreter, so the value classes are taken from values it creates,
// and a handful of prototype methods are wrapped. This touches library internals: the version is pinned and the
// template goldens catch any drift.
import { Environment, Interpreter } from "@huggingface/jinja";

type Value = { type: string; value: unknown; builtins?: Map<string, unknown>; toString(): string };
type ValueClass = { prototype: Value } & (new (value?: unknown) => Value);
type Node = { type: string; [key: string]: unknown };

// instanceof without type narrowing: every value class has the same TypeScript shape here.
function isA(v: unknown, c: ValueClass): boolean {
  return v instanceof (c as unknown as new () => object);
}

function classOf(v: unknown): ValueClass {
  const probe = new Environment();
  probe.set("v", v);
  return (probe.lookupVariable("v") as unknown as Value).constructor as unknown as ValueClass;
}
const StringValue = classOf("");
const BooleanValue = classOf(true);
const NullValue = classOf(null);
const FloatValue = classOf(1.5);
const ArrayValue = classOf([]);
const ObjectValue = classOf({});
const UndefinedValue = (new Environment().lookupVariable("nothing_here") as unknown as Value).constructor as unknown as ValueClass;

// Python's str.isspace() characters, what str.strip() with no argument removes (JavaScript's trim differs: it
// removes U+FEFF and keeps U+001C-U+001F).
const PY_SPACE = "\t\n\v\f\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000";

// Walks in from the ends by code points (surrogate pairs together, as Python's str sees them), so stripping a
// message of megabytes costs what it strips, not a copy of every character.
export function pyStrip(s: string, chars: string | null, left: boolean, right: boolean): string {
  const set = new Set(chars ?? PY_SPACE);
  let a = 0;
  let b = s.length;
  if (left) {
    while (a < b) {
      const ch = String.fromCodePoint(s.codePointAt(a)!);
      if (!set.has(ch)) break;
      a += ch.length;
    }
  }
  if (right) {
    while (b > a) {
      const pair = b - a >= 2 && /^[\uD800-\uDBFF][\uDC00-\uDFFF]$/.test(s.slice(b - 2, b));
      const ch = s.slice(pair ? b - 2 : b - 1, b);
      if (!set.has(ch)) break;
      b -= ch.length;
    }
  }
  return s.slice(a, b);
}

// Python's repr(float): the shortest round-trip digits (as JavaScript), in fixed notation for exponents -4..15
// and scientific notation with a two-digit exponent otherwise.
export function pyFloat(x: number): string {
  if (Number.isNaN(x)) return "nan";
  if (!Number.isFinite(x)) return x > 0 ? "inf" : "-inf";
  if (Object.is(x, -0)) return "-0.0";
  const [m, eText] = Math.abs(x).toExponential().split("e") as [string, string];
  const digits = m.replace(".", "");
  const e = Number(eText);
  const sign = x < 0 ? "-" : "";
  if (e < -4 || e >= 16) return `${sign}${m}e${e < 0 ? "-" : "+"}${String(Math.abs(e)).padStart(2, "0")}`;
  if (e < 0) return `${sign}0.${"0".repeat(-e - 1)}${digits}`;
  return `${sign}${digits.slice(0, e + 1).padEnd(e + 1, "0")}.${digits.slice(e + 1) || "0"}`;
}

function pyStrRepr(s: string): string {
  const quote = s.includes("'") && !s.includes('"') ? '"' : "'";
  let out = quote;
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    if (ch === quote || ch === "\\") out += `\\${ch}`;
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += "\\t";
    else if (c < 0x20 || c === 0x7f) out += `\\x${c.toString(16).padStart(2, "0")}`;
    else out += ch;
  }
  return out + quote;
}

function isFloat(v: Value): boolean {
  return isA(v, FloatValue);
}

// Python's repr() of a runtime value (what str() gives inside lists and dicts).
function pyRepr(v: Value): string {
  if (isA(v, StringValue)) return pyStrRepr(v.value as string);
  return pyStr(v);
}

// Python's str() of a runtime value: what {{ x }}, |string and ~ produce.
export function pyStr(v: Value): string {
  if (isA(v, StringValue)) return v.value as string;
  if (isA(v, BooleanValue)) return v.value ? "True" : "False";
  if (isA(v, NullValue)) return "None";
  if (isA(v, UndefinedValue)) return "";
  if (isFloat(v)) return pyFloat(v.value as number);
  if (isA(v, ArrayValue)) {
    const items = (v.value as Value[]).map(pyRepr);
    return v.type === "TupleValue" ? `(${items.join(", ")}${items.length === 1 ? "," : ""})` : `[${items.join(", ")}]`;
  }
  if (isA(v, ObjectValue)) {
    const m = v.value as Map<string, Value>;
    return `{${Array.from(m, ([k, x]) => `${pyStrRepr(k)}: ${pyRepr(x)}`).join(", ")}}`;
  }
  return String(v.value);
}

type JsonOptions = { indent: number | null; separators: [string, string] | null; sortKeys: boolean; ensureAscii: boolean };

// Python's json.dumps over runtime values.
export function pyJson(v: Value, o: JsonOptions, depth = 0): string {
  const [itemSep, keySep] = o.separators ?? (o.indent !== null ? [",", ": "] : [", ", ": "]);
  const str = (s: string) => {
    const j = JSON.stringify(s);
    return o.ensureAscii ? j.replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`) : j;
  };
  if (isA(v, StringValue)) return str(v.value as string);
  if (isA(v, BooleanValue)) return v.value ? "true" : "false";
  if (isA(v, NullValue) || isA(v, UndefinedValue)) return "null";
  if (isFloat(v)) {
    const x = v.value as number;
    return Number.isFinite(x) ? pyFloat(x) : Number.isNaN(x) ? "NaN" : x > 0 ? "Infinity" : "-Infinity";
  }
  if (typeof v.value === "number") return String(v.value);
  const pad = o.indent !== null ? `\n${" ".repeat(o.indent * (depth + 1))}` : "";
  const end = o.indent !== null ? `\n${" ".repeat(o.indent * depth)}` : "";
  let parts: string[];
  let open: string;
  let close: string;
  if (isA(v, ArrayValue)) {
    parts = (v.value as Value[]).map((x) => pyJson(x, o, depth + 1));
    [open, close] = ["[", "]"];
  } else if (isA(v, ObjectValue) || v.type === "NamespaceValue") {
    let entries = Array.from(v.value as Map<string, Value>);
    if (o.sortKeys) entries = entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    parts = entries.map(([k, x]) => `${str(k)}${keySep}${pyJson(x, o, depth + 1)}`);
    [open, close] = ["{", "}"];
  } else {
    throw new Error(`tojson: cannot serialize a ${v.type}`);
  }
  if (parts.length === 0) return open + close;
  return o.indent !== null ? `${open}${pad}${parts.join(`${itemSep}${pad}`)}${end}${close}` : `${open}${parts.join(itemSep)}${close}`;
}

const STATEMENTS = new Set(["Program", "If", "For", "Break", "Continue", "Set", "Macro", "Comment", "CallStatement", "FilterStatement"]);

let installed = false;

// Installs the Python behaviour into the library (idempotent). Called by src/chat/template.ts before any render.
export function installPythonSemantics(): void {
  if (installed) return;
  installed = true;

  // 1. strip/lstrip/rstrip with a character argument.
  const builtins = Object.getOwnPropertyDescriptor(StringValue.prototype, "builtins")!.get!;
  const patched = new WeakSet<Map<string, unknown>>();
  const FunctionValue = classOf(() => undefined);
  Object.defineProperty(StringValue.prototype, "builtins", {
    configurable: true,
    get(this: Value) {
      const map = builtins.call(this) as Map<string, unknown>;
      if (!patched.has(map)) {
        patched.add(map);
        const s = this.value as string;
        const strip = (left: boolean, right: boolean) =>
          new FunctionValue((args: Value[]) => {
            const arg = args[0];
            const chars = arg === undefined || isA(arg, NullValue) ? null : String(arg.value);
            return new StringValue(pyStrip(s, chars, left, right));
          });
        map.set("strip", strip(true, true));
        map.set("lstrip", strip(true, false));
        map.set("rstrip", strip(false, true));
      }
      return map;
    },
  });

  // 2-4. How values print.
  BooleanValue.prototype.toString = function (this: Value) {
    return this.value ? "True" : "False";
  };
  FloatValue.prototype.toString = function (this: Value) {
    return pyFloat(this.value as number);
  };
  ArrayValue.prototype.toString = function (this: Value) {
    return pyStr(this);
  };
  ObjectValue.prototype.toString = function (this: Value) {
    return pyStr(this);
  };

  const proto = Interpreter.prototype as unknown as {
    evaluate(node: Node, env: unknown): Value;
    evaluateBlock(statements: Node[], env: unknown): Value;
    evaluateBinaryExpression(node: Node, env: unknown): Value;
    applyFilter(operand: Value, filter: Node, env: unknown): Value;
  };

  // {{ none }} prints "None"; statements ({% set %}, {% if %}, ...) print nothing, as before.
  proto.evaluateBlock = function (statements, env) {
    let out = "";
    for (const s of statements) {
      const v = this.evaluate(s, env);
      if (isA(v, NullValue)) out += STATEMENTS.has(s.type) ? "" : "None";
      else if (!(isA(v, UndefinedValue))) out += v.toString();
    }
    return new StringValue(out);
  };

  // a ~ b concatenates Python str() of both sides (an undefined side is "").
  const binary = proto.evaluateBinaryExpression;
  proto.evaluateBinaryExpression = function (node, env) {
    if ((node.operator as { value: string }).value === "~") {
      const l = this.evaluate(node.left as Node, env);
      const r = this.evaluate(node.right as Node, env);
      return new StringValue(pyStr(l) + pyStr(r));
    }
    return binary.call(this, node, env);
  };

  // |string and |trim as Python; |tojson as transformers' json.dumps(ensure_ascii=False, ...).
  const applyFilter = proto.applyFilter;
  proto.applyFilter = function (operand, filter, env) {
    const name = filter.type === "Identifier" ? (filter.value as string) : filter.type === "CallExpression" ? ((filter.callee as Node).value as string) : "";
    if (name === "string" && filter.type === "Identifier") return new StringValue(pyStr(operand));
    if (name === "trim" && filter.type === "Identifier" && isA(operand, StringValue)) {
      return new StringValue(pyStrip(operand.value as string, null, true, true));
    }
    if (name === "tojson") {
      const kwargs = new Map<string, Value>();
      if (filter.type === "CallExpression") {
        for (const a of filter.args as Node[]) {
          if (a.type !== "KeywordArgumentExpression") throw new Error("tojson takes keyword arguments only");
          kwargs.set((a.key as Node).value as string, this.evaluate(a.value as Node, env));
        }
      }
      const indent = kwargs.get("indent");
      const seps = kwargs.get("separators");
      return new StringValue(
        pyJson(operand, {
          indent: indent && typeof indent.value === "number" ? indent.value : null,
          separators: seps && Array.isArray(seps.value) ? ((seps.value as Value[]).map((x) => String(x.value)) as [string, string]) : null,
          sortKeys: kwargs.get("sort_keys")?.value === true,
          ensureAscii: kwargs.get("ensure_ascii")?.value === true,
        }),
      );
    }
    return applyFilter.call(this, operand, filter, env);
  };
}
