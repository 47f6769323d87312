/// <reference lib="dom" />
// A small SVG line chart of rates over the last minutes: one line per series, newest sample at the right edge,
// the y axis from 0 to a round number above the largest value.

export type Line = { values: readonly number[]; className: string };

const SVG = "http://www.w3.org/2000/svg";
const H = 90;
const LEFT = 34; // room for the y labels

function el<K extends keyof SVGElementTagNameMap>(name: K, attrs: Record<string, string | number>): SVGElementTagNameMap[K] {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  return node;
}

// 1, 2 or 5 times a power of ten, at least `v`.
function niceCeiling(v: number): number {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 5, 10].map((m) => m * p).find((c) => c >= v)!;
}

export function compact(v: number): string {
  if (v >= 1e6) return `${(v / 1e6).toFixed(v >= 1e7 ? 0 : 1)}M`;
  if (v >= 1e3) return `${(v / 1e3).toFixed(v >= 1e4 ? 0 : 1)}k`;
  return v >= 10 || v === 0 ? v.toFixed(0) : v.toFixed(1);
}

// Draws the last `capacity` samples of each line into `container`, replacing what was there.
export function drawChart(container: HTMLElement, lines: readonly Line[], capacity: number): void {
  const shown = lines.map((l) => ({ className: l.className, values: l.values.slice(-capacity) }));
  const W = Math.max(200, container.clientWidth); // drawn at the container's size: text is not stretched
  const top = niceCeiling(Math.max(0, ...shown.flatMap((l) => l.values)));
  const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, role: "img" });
  const y = (v: number) => H - 2 - (v / top) * (H - 12);
  const x = (i: number, n: number) => W - ((n - 1 - i) / Math.max(1, capacity - 1)) * (W - LEFT);
  for (const v of [0, top / 2, top]) {
    svg.append(el("line", { class: "grid", x1: LEFT, x2: W, y1: y(v), y2: y(v) }));
    const label = el("text", { class: "axis", x: LEFT - 4, y: y(v) + 3, "text-anchor": "end" });
    label.textContent = compact(v);
    svg.append(label);
  }
  for (const line of shown) {
    const n = line.values.length;
    if (n < 2) continue;
    const points = line.values.map((v, i) => `${x(i, n).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
    svg.append(el("polyline", { class: line.className, points }));
  }
  container.replaceChildren(svg);
}
