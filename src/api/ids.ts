// Ids for responses, messages, items and tool calls: a vendor-style prefix and 24 random hex digits.
export function newId(prefix: string): string {
  const bytes = crypto.getRandomValues(new Uint8Array(12));
  return prefix + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

export const unixSeconds = () => Math.floor(Date.now() / 1000);
