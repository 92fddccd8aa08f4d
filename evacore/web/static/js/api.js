// The page's only door to evacore: the HTTP API under v1/, with the token kept in the browser.
// Must not: know about views; every call goes through `api()` so errors look the same everywhere.

const TOKEN_KEY = "evacore.token";
const BASE = new URL("v1/", document.baseURI);

export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details || {};
  }
  /** Validation problems as reported by the API (`details.problems`), else the message. */
  get problems() {
    const list = this.details.problems;
    return Array.isArray(list) && list.length ? list : [this.message];
  }
}

let onUnauthorized = () => {};

export const auth = {
  get token() { return localStorage.getItem(TOKEN_KEY) || ""; },
  save(token) { localStorage.setItem(TOKEN_KEY, token); },
  clear() { localStorage.removeItem(TOKEN_KEY); },
  /** Called when a stored token stops working (the page goes back to sign-in). */
  onUnauthorized(fn) { onUnauthorized = fn; },
};

async function errorOf(response) {
  let code = `http_${response.status}`;
  let message = response.statusText || `HTTP ${response.status}`;
  let details;
  try {
    const body = await response.json();
    const err = body && body.error;
    if (err) {
      code = err.code || code;
      message = err.message || message;
      details = err.details;
    }
  } catch { /* not JSON: keep the status line */ }
  return new ApiError(response.status, code, message, details);
}

/**
 * Call the API. `body` is sent as JSON, `form` as multipart. Returns parsed JSON, `null`
 * for 204, or the Response itself with `raw: true`. Throws ApiError on any non-2xx.
 */
export async function api(path, { method, body, form, signal, raw, token } = {}) {
  const headers = { Authorization: `Bearer ${token ?? auth.token}` };
  let payload;
  if (form !== undefined) {
    payload = form;
  } else if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    payload = JSON.stringify(body);
  }
  const response = await fetch(new URL(path.replace(/^\//, ""), BASE), {
    method: method || (payload === undefined ? "GET" : "POST"),
    headers, body: payload, signal, cache: "no-store",
  });
  if (!response.ok) {
    const error = await errorOf(response);
    if (response.status === 401 && token === undefined) onUnauthorized(error);
    throw error;
  }
  if (raw) return response;
  if (response.status === 204) return null;
  const type = response.headers.get("Content-Type") || "";
  return type.includes("json") ? response.json() : response.blob();
}

/** The events of an SSE response body as {event, data} objects, parsed as they arrive. */
export async function* sseEvents(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let event = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length) {
        try { yield { event, data: JSON.parse(data.join("\n")) }; }
        catch { yield { event, data: data.join("\n") }; }
      }
    }
  }
}

/** Fetch a file from the API and hand it to the browser as a download. */
export async function download(path, fallbackName) {
  const response = await api(path, { raw: true });
  const disposition = response.headers.get("Content-Disposition") || "";
  const match = /filename\*=UTF-8''([^;]+)|filename="?([^";]+)"?/i.exec(disposition);
  const name = match ? decodeURIComponent(match[1] || match[2]) : fallbackName;
  const url = URL.createObjectURL(await response.blob());
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
