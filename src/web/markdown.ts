/// <reference lib="dom" />
// Answers as HTML: markdown-it with raw HTML off (model output is text, never markup), links checked by
// markdown-it's own rules and opened in a new tab, and each code block given a copy button.
import MarkdownIt from "markdown-it";

const md = new MarkdownIt({ html: false, linkify: true });

md.renderer.rules.fence = (tokens, idx) => {
  const token = tokens[idx]!;
  const lang = token.info.trim().split(/\s+/)[0];
  const cls = lang ? ` class="language-${md.utils.escapeHtml(lang)}"` : "";
  return `<div class="code"><button class="copy" type="button">Copy</button><pre><code${cls}>${md.utils.escapeHtml(token.content)}</code></pre></div>\n`;
};
md.renderer.rules.code_block = (tokens, idx) => {
  const token = tokens[idx]!;
  return `<div class="code"><button class="copy" type="button">Copy</button><pre><code>${md.utils.escapeHtml(token.content)}</code></pre></div>\n`;
};
md.renderer.rules.link_open = (tokens, idx, options, _env, self) => {
  const token = tokens[idx]!;
  token.attrSet("target", "_blank");
  token.attrSet("rel", "noopener noreferrer");
  return self.renderToken(tokens, idx, options);
};

export function renderMarkdown(text: string): string {
  return md.render(text);
}

// Copies the code of a block whose copy button was clicked (a click anywhere in `root` is passed in).
export async function copyCodeBlock(event: MouseEvent): Promise<void> {
  const button = (event.target as Element | null)?.closest<HTMLButtonElement>("button.copy");
  const code = button?.parentElement?.querySelector("code");
  if (!button || !code) return;
  const text = code.textContent ?? "";
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    // no clipboard API (a page served over plain HTTP from another host): the older way
    const area = document.createElement("textarea");
    area.value = text;
    document.body.append(area);
    area.select();
    document.execCommand("copy");
    area.remove();
  }
  button.textContent = "Copied";
  setTimeout(() => (button.textContent = "Copy"), 1500);
}
