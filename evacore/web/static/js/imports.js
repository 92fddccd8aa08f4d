// Importing files the way SillyTavern users have them: character cards (PNG, JSON, CHARX)
// and World Info lorebooks (JSON), from a file input or dropped on the page.
// Must not: parse cards or lorebooks (the server does); it only decides where a file goes.

import { api } from "./api.js";

/** "character" or "lorebook" for a file, by its kind and, for JSON, by a look inside. */
export async function kindOf(file) {
  const name = file.name.toLowerCase();
  if (name.endsWith(".png") || name.endsWith(".charx") || file.type === "image/png") return "character";
  if (!name.endsWith(".json") && file.type !== "application/json") return "character";
  try {
    const data = JSON.parse(await file.text());
    const card = data && (data.spec || data.first_mes !== undefined || (data.data && data.data.first_mes !== undefined));
    if (!card && data && typeof data.entries === "object") return "lorebook";
  } catch { /* not JSON: the server says what is wrong with it */ }
  return "character";
}

/** Upload one file to the matching import endpoint; resolves to the stored object. */
export async function importFile(file, kind) {
  const form = new FormData();
  form.append("file", file, file.name);
  const path = kind === "lorebook" ? "lorebooks/import" : "characters";
  return api(path, { form });
}

/** Import several files; returns [{file, kind, result?, error?}] in order. */
export async function importFiles(files, forceKind) {
  const out = [];
  for (const file of files) {
    const kind = forceKind || (await kindOf(file));
    try {
      out.push({ file, kind, result: await importFile(file, kind) });
    } catch (error) {
      out.push({ file, kind, error });
    }
  }
  return out;
}
