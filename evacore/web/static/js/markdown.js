// Markdown of model and user text, always sanitized, and a streaming view that renders
// only the growing tail of an answer (finished blocks are parsed once).
// Must not: put any text into the DOM that did not pass through DOMPurify.

import { marked } from "marked";
import DOMPurify from "dompurify";

marked.use({ gfm: true, breaks: true });

const PURIFY = {
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "iframe", "svg",
                "math"],
  FORBID_ATTR: ["style", "class", "id"],
  ALLOW_DATA_ATTR: false,
};

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer nofollow");
  }
});

const EMBEDDED = /^data:image\/(png|jpe?g|gif|webp);/i;

// Images from elsewhere would make the browser fetch them (a leak, and no request may
// leave this server): only embedded images are shown; the others become plain links.
function detachImages(root) {
  for (const img of root.querySelectorAll("img")) {
    const src = img.getAttribute("src") || "";
    if (EMBEDDED.test(src)) continue;
    const link = document.createElement("a");
    link.textContent = `[image: ${img.getAttribute("alt") || "no description"}]`;
    link.title = src;
    if (/^https?:/i.test(src)) {
      link.href = src;
      link.target = "_blank";
      link.rel = "noopener noreferrer nofollow";
    }
    img.replaceWith(link);
  }
  return root;
}

/** Markdown → sanitized HTML string. */
export function renderMarkdown(text) {
  if (!text) return "";
  const html = marked.parse(text, { async: false });
  const body = DOMPurify.sanitize(html, { ...PURIFY, RETURN_DOM: true });
  return detachImages(body).innerHTML;
}

/**
 * Where the text can be cut so that the part before never changes its rendering again:
 * the last blank line at or after `from` that is outside a fenced code block. `from` must be
 * such a cut itself (or 0).
 */
export function stableCut(text, from) {
  let inFence = null;
  let cut = from;
  let pos = from;
  while (pos < text.length) {
    const end = text.indexOf("\n", pos);
    if (end < 0) break; // the last line may still grow
    const line = text.slice(pos, end);
    const fence = /^ {0,3}(`{3,}|~{3,})/.exec(line);
    if (fence) {
      if (inFence === null) inFence = fence[1][0];
      else if (fence[1][0] === inFence) inFence = null;
    } else if (inFence === null && line.trim() === "" && pos > from) {
      cut = end + 1;
    }
    pos = end + 1;
  }
  return cut;
}

/**
 * A message body that grows token by token. `append()` is cheap: the DOM is updated at most
 * once per animation frame, and only the block still being written is parsed again.
 */
export class StreamView {
  constructor(element, initial = "") {
    this.element = element;
    this.frozen = document.createElement("div");
    this.tail = document.createElement("div");
    this.frozen.className = "md-frozen";
    this.tail.className = "md-tail";
    element.replaceChildren(this.frozen, this.tail);
    this.text = "";
    this.stable = 0;
    this.scheduled = false;
    this.onFlush = null;
    if (initial) this.append(initial);
  }

  append(piece) {
    this.text += piece;
    if (!this.scheduled) {
      this.scheduled = true;
      requestAnimationFrame(() => this.flush());
    }
  }

  flush() {
    this.scheduled = false;
    const cut = stableCut(this.text, this.stable);
    if (cut > this.stable) {
      const block = document.createElement("div");
      block.innerHTML = renderMarkdown(this.text.slice(this.stable, cut));
      this.frozen.append(block);
      this.stable = cut;
    }
    this.tail.innerHTML = renderMarkdown(this.text.slice(this.stable));
    if (this.onFlush) this.onFlush();
  }
}
