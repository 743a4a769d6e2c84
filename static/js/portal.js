// Portal pages talk to the REST API (/api/v1) with the browser session; no build step, no framework.
//
// - <form data-api="/api/v1/…" data-method="PATCH" data-after="reload|remove|event"> sends its fields as JSON.
//   Field names with dots nest ("schedule.cron"); data-type on a field: int, bool, lines (one item a
//   line), kv (KEY=VALUE lines → object), json, null-empty (empty → null), omit-empty (empty → left out).
// - <button data-api=… data-method=… data-body='{"…"}' data-confirm="…" data-after=…> does one call.
// - <input type="checkbox" data-api=… data-method="PUT" data-field="enabled"> sends {field: checked}.
// Errors ({"error": {message, fields}}) are shown next to the form or control, never swallowed.
// A native ES module (docs/architecture.md "static/js"): every page loads it; it exports setBodyBuilder
// and refreshInbox for the page modules (settings.js).
import { api as apiFetch, errorText } from "./api.js";

// A form whose body is not just its fields (data-api forms): the page's module gives the function that
// builds it, here, for that form (no lookup by name).
const builders = new WeakMap();
export function setBodyBuilder(form, build) {
  builders.set(form, build);
}

function setPath(obj, path, value) {
  const keys = path.split(".");
  let node = obj;
  keys.slice(0, -1).forEach((k) => {
    if (typeof node[k] !== "object" || node[k] === null) node[k] = {};
    node = node[k];
  });
  node[keys[keys.length - 1]] = value;
}

function fieldValue(field) {
  const type = field.dataset.type || "";
  if (field.type === "checkbox") return { value: field.checked };
  const raw = field.value;
  if (type.includes("omit-empty") && raw.trim() === "") return null;
  if (type.includes("null-empty") && raw.trim() === "") return { value: null };
  if (type.includes("int")) return { value: raw.trim() === "" ? null : Number(raw) };
  if (type.includes("lines")) return { value: raw.split("\n").map((s) => s.trim()).filter(Boolean) };
  if (type.includes("kv")) {
    const out = {};
    raw.split("\n").map((s) => s.trim()).filter(Boolean).forEach((line) => {
      const at = line.indexOf("=");
      if (at > 0) out[line.slice(0, at).trim()] = line.slice(at + 1);
    });
    return { value: out };
  }
  if (type.includes("json")) {
    try { return { value: raw.trim() ? JSON.parse(raw) : null }; } catch (e) { throw new Error(field.name + ": not valid JSON."); }
  }
  return { value: raw };
}

function formBody(form) {
  const body = {};
  for (const field of form.elements) {
    if (!field.name || field.disabled || field.dataset.skip !== undefined) continue;
    if (field.closest("[hidden]") && field.closest("form") === form && field.closest("[hidden]") !== form) continue;
    if (field.type === "radio" && !field.checked) continue;
    const v = fieldValue(field);
    if (v !== null) setPath(body, field.name, v.value);
  }
  return body;
}

function statusOf(node) {
  let out = node.querySelector && node.querySelector("output.form-status");
  if (!out && node.parentElement) out = node.parentElement.querySelector("output.form-status");
  return out;
}

function show(out, text, bad) {
  if (!out) { if (bad) window.alert(text); return; }
  out.textContent = text;
  out.classList.toggle("error", !!bad);
  out.classList.toggle("ok", !bad);
}

function markFields(form, fields) {
  form.querySelectorAll("[aria-invalid]").forEach((f) => f.removeAttribute("aria-invalid"));
  form.querySelectorAll(".field-error").forEach((f) => f.remove());
  if (!fields) return;
  for (const [name, messages] of Object.entries(fields)) {
    const field = form.querySelector('[name="' + CSS.escape(name) + '"]') || form.querySelector('[name$=".' + CSS.escape(name) + '"]');
    if (!field) continue;
    field.setAttribute("aria-invalid", "true");
    const note = document.createElement("div");
    note.className = "field-error error";
    note.id = (field.id || field.name) + "-error";
    note.textContent = [].concat(messages).join(" ");
    field.insertAdjacentElement("afterend", note);
    field.setAttribute("aria-describedby", note.id);
  }
}

function after(node, result) {
  const what = node.dataset.after || "";
  node.dispatchEvent(new CustomEvent("api:done", { bubbles: true, detail: result.data }));
  if (what === "reload") window.location.reload();
  else if (what.startsWith("go:")) window.location.assign(what.slice(3));
  else if (what === "remove") {
    const row = node.closest("[data-row]");
    if (row) row.remove();
  }
}

document.addEventListener("submit", async (e) => {
  const form = e.target;
  if (!(form instanceof HTMLFormElement) || !form.dataset.api) return;
  e.preventDefault();
  const out = statusOf(form);
  const build = builders.get(form) || formBody;
  let body;
  try { body = build(form); } catch (err) { show(out, err.message, true); return; }
  const submitButton = form.querySelector('[type="submit"]');
  if (submitButton) submitButton.disabled = true;
  show(out, "Saving…", false);
  const result = await apiFetch(form.dataset.method || "POST", form.dataset.api, body);
  if (submitButton) submitButton.disabled = false;
  if (!result.ok) {
    markFields(form, result.data && result.data.error && result.data.error.fields);
    show(out, errorText(result), true);
    return;
  }
  markFields(form, null);
  show(out, form.dataset.done || "Saved.", false);
  after(form, result);
});

document.addEventListener("click", async (e) => {
  const node = e.target.closest("button[data-api]");
  if (!node || node.form && node.form.dataset.api && node.type === "submit") return;
  if (node.dataset.confirm && !window.confirm(node.dataset.confirm)) return;
  const out = statusOf(node.closest("[data-row]") || node.parentElement);
  node.disabled = true;
  const body = node.dataset.body ? JSON.parse(node.dataset.body) : undefined;
  const result = await apiFetch(node.dataset.method || "POST", node.dataset.api, body);
  node.disabled = false;
  if (!result.ok) { show(out, errorText(result), true); return; }
  if (node.dataset.done) show(out, node.dataset.done, false);
  after(node, result);
});

document.addEventListener("change", async (e) => {
  const box = e.target;
  if (!(box instanceof HTMLInputElement) || box.type !== "checkbox" || !box.dataset.api) return;
  const out = statusOf(box.closest("[data-row]") || box.parentElement);
  const wanted = box.checked;
  box.disabled = true;
  const result = await apiFetch(box.dataset.method || "PUT", box.dataset.api, { [box.dataset.field || "enabled"]: wanted });
  box.disabled = false;
  if (!result.ok) {
    box.checked = !wanted;
    show(out, errorText(result), true);
    return;
  }
  show(out, wanted ? "On" : "Off", false);
});

// Copy buttons: <button data-copy="#id">.
document.addEventListener("click", async (e) => {
  const b = e.target.closest("button[data-copy]");
  if (!b) return;
  const target = document.querySelector(b.dataset.copy);
  if (!target) return;
  const text = target.value !== undefined ? target.value : target.textContent;
  try {
    await navigator.clipboard.writeText(text);
    b.textContent = "Copied";
  } catch (err) {
    if (target.select) target.select();
    b.textContent = "Press Ctrl+C";
  }
});

// The chat header's rename form.
const renameOpen = document.getElementById("rename-open");
const renameForm = document.getElementById("rename-form");
if (renameOpen && renameForm) {
  const toggle = (open) => {
    renameForm.hidden = !open;
    renameOpen.setAttribute("aria-expanded", String(open));
    if (open) document.getElementById("rename-title").select();
    else renameOpen.focus();
  };
  renameOpen.addEventListener("click", () => toggle(renameForm.hidden));
  document.getElementById("rename-cancel").addEventListener("click", () => toggle(false));
  renameForm.addEventListener("keydown", (e) => { if (e.key === "Escape") toggle(false); });
}

// The phone menu: the top bar's links fold behind one button below 760 px (static/css/site.css).
const navToggle = document.getElementById("nav-toggle");
const nav = document.getElementById("main-nav");
if (navToggle && nav) {
  navToggle.addEventListener("click", () => {
    const open = !nav.classList.contains("open");
    nav.classList.toggle("open", open);
    navToggle.setAttribute("aria-expanded", String(open));
  });
}

// Light or dark, remembered (static/js/theme.js applies it before the page is drawn).
const themeToggle = document.getElementById("theme-toggle");
if (themeToggle) {
  const show = () => {
    const dark = document.documentElement.dataset.theme === "dark";
    themeToggle.setAttribute("aria-pressed", String(dark));
    themeToggle.textContent = dark ? "Light" : "Dark";
    themeToggle.title = dark ? "Use the light theme" : "Use the dark theme";
  };
  themeToggle.addEventListener("click", () => {
    const next = document.documentElement.dataset.theme === "dark" ? "light" : "dark";
    document.documentElement.dataset.theme = next;
    try { localStorage.setItem("agentsite:theme", next); } catch (e) { /* storage off */ }
    show();
  });
  show();
}

// The unread badge in the top bar follows the inbox while the page is open.
const badge = document.getElementById("inbox-badge");
export async function refreshInbox() {
  if (!badge || !badge.dataset.poll) return;
  const result = await apiFetch("GET", "/api/v1/inbox?unread_only=true&limit=100");
  if (!result.ok || !result.data) return;
  const n = (result.data.results || []).length;
  const text = n >= 100 || result.data.next ? "99+" : String(n);
  badge.hidden = n === 0;
  badge.querySelector(".n").textContent = text;
}
if (badge && badge.dataset.poll) {
  window.setInterval(refreshInbox, 30000);
  // Back or forward: the page may come from a cache, with the count it had then.
  const nav = performance.getEntriesByType ? performance.getEntriesByType("navigation")[0] : null;
  window.addEventListener("pageshow", (e) => { if (e.persisted || (nav && nav.type === "back_forward")) refreshInbox(); });
}
