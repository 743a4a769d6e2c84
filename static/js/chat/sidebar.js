// The chat list (home and chat pages): grouped by day of last activity, searched on the server (title and
// content, GET /chat/sessions?q=), archived chats behind a switch; each chat can be renamed, archived or
// deleted. Delete waits a few seconds before it asks the server (DELETE …?hide=true, docs/protocol.md
// extensions "Sessions"), so Undo needs no server at all. On a phone the list is a drawer.
// A native ES module: the home page loads it, main.js imports it. The list is drawn with lit-html
// (static/vendor/README.md). Exports sessionAdded, sessionTitle, onTitle and syncSessions for main.js.
import { api as call, csrfToken } from "../api.js";
import { $ } from "../dom.js";
import { toast } from "../toast.js";
import { html, nothing, render as draw } from "../../vendor/lit-html/lit-html.js";

const list = $("sessions");
const api = "/api/v1/chat/sessions";
const chatRoot = $("chat");
const currentId = () => (chatRoot ? chatRoot.dataset.sessionId : "");
const phone = () => window.matchMedia("(max-width: 760px)").matches;
const DELETE_AFTER = 6000;
const doomed = new Map(); // session id -> timer of its delayed DELETE

// What the server drew: the recent chats, kept to come back to after a search.
let recent = Array.from(list ? list.querySelectorAll("li.item") : []).map((li) => ({
  session_id: li.dataset.sessionId,
  title: li.dataset.title,
  status: li.dataset.status,
  updated_at: li.dataset.updated,
  archived_at: null,
}));
let mode = "recent"; // recent | search | archived
let renaming = null; // the id of the chat whose title is being edited in the list
let titleListener = null; // main.js: the open chat's title changed

function dayLabel(date) {
  const start = (d) => new Date(d.getFullYear(), d.getMonth(), d.getDate()).getTime();
  const days = Math.round((start(new Date()) - start(date)) / 86400000);
  if (days <= 0) return "Today";
  if (days === 1) return "Yesterday";
  if (days < 7) return "Previous 7 days";
  if (days < 30) return "Previous 30 days";
  return date.toLocaleDateString(undefined, { month: "long", year: "numeric" });
}

// One chat in the list: its link (or the title being edited) and its ⋯ menu.
function item(s) {
  const title = s.title || "Untitled chat";
  const editing = renaming === s.session_id;
  const act = (run) => (e) => { e.target.closest("details").open = false; run(); };
  const renameKeys = (e) => {
    if (e.key === "Enter") { e.preventDefault(); finishRename(s, e.target, true); }
    if (e.key === "Escape") { e.preventDefault(); finishRename(s, e.target, false); }
  };
  const input = editing
    ? html`<input class="rename-inline" maxlength="200" aria-label=${"New title for " + title} .value=${s.title || ""}
        @keydown=${renameKeys} @blur=${(e) => finishRename(s, e.target, true)}>`
    : nothing;
  return html`<li class=${"item" + (s.status === "closed" ? " closed" : "")} data-session-id=${s.session_id}>${input}<a
    href=${"/chat/" + encodeURIComponent(s.session_id)} ?hidden=${editing}
    aria-current=${s.session_id === currentId() ? "page" : nothing}>${title}</a><details class="item-menu" @toggle=${placeMenu}><summary
    aria-label=${"Actions for " + title}>⋯</summary><div class="menu"><button type="button" @click=${act(() => rename(s))}>Rename</button><button
    type="button" @click=${act(() => archive(s, !s.archived_at))}>${s.archived_at ? "Unarchive" : "Archive"}</button><button
    type="button" class="danger" @click=${act(() => remove(s))}>Delete</button></div></details></li>`;
}

function placeMenu(e) {
  const menu = e.currentTarget;
  if (menu.open) place(menu.querySelector(".menu"), menu.querySelector("summary"));
  else delete menu.querySelector(".menu").dataset.anchorTop;
}

// An open ⋯ menu is fixed to the window beside its button, so the scrolling list never clips it: below
// the button, or above it where the window ends; it closes when the list scrolls or the window changes.
function place(box, anchor) {
  for (const other of list.querySelectorAll("details.item-menu[open]")) {
    if (other !== anchor.parentElement) other.open = false;
  }
  const at = anchor.getBoundingClientRect();
  const room = window.innerHeight - at.bottom;
  box.style.left = Math.max(4, at.right - box.offsetWidth) + "px";
  box.style.top = (room < box.offsetHeight + 4 && at.top > box.offsetHeight ? at.top - box.offsetHeight : at.bottom) + "px";
  box.dataset.anchorTop = String(at.top);
}
const closeMenus = () => list.querySelectorAll("details.item-menu[open]").forEach((d) => { d.open = false; });
// A scroll closes the menus whose button it moved; one opened as the list scrolled to it (the open comes
// before the scroll event, the placing after) stays.
function closeMovedMenus() {
  list.querySelectorAll("details.item-menu[open]").forEach((d) => {
    const placed = d.querySelector(".menu").dataset.anchorTop;
    if (placed !== undefined && Math.abs(d.querySelector("summary").getBoundingClientRect().top - Number(placed)) > 1) d.open = false;
  });
}

function render(sessions, emptyText) {
  const shown = sessions.filter((s) => !doomed.has(s.session_id));
  const time = (s) => Date.parse(s.updated_at) || 0;
  shown.sort((a, b) => time(b) - time(a));
  closeMenus(); // a redrawn list has no menu open (its rows may now be other chats)
  const rows = [];
  let group = null;
  for (const s of shown) {
    const label = dayLabel(new Date(s.updated_at));
    if (label !== group) {
      group = label;
      rows.push(html`<li class="group">${label}</li>`);
    }
    rows.push(item(s));
  }
  if (!shown.length) rows.push(html`<li class="muted">${emptyText}</li>`);
  draw(rows, list);
}

async function fetchList(query) {
  const r = await call("GET", api + "?limit=100&" + query);
  return r.ok ? r.data.results : [];
}

function showRecent() {
  mode = "recent";
  render(recent, "No chats yet.");
}

function rename(s) {
  renaming = s.session_id;
  refreshView();
  const input = list.querySelector("input.rename-inline");
  if (input) {
    input.focus();
    input.select();
  }
}

async function finishRename(s, input, save) {
  if (renaming !== s.session_id) return; // done already (Enter, then the blur of the removed field)
  renaming = null;
  const value = input.value.trim();
  if (save && value !== (s.title || "")) {
    const r = await call("PATCH", api + "/" + encodeURIComponent(s.session_id), { title: value });
    if (r.ok) {
      s.title = r.data.title;
      sessionTitle(s.session_id, s.title);
    } else toast("Could not rename it: " + ((r.data && r.data.error && r.data.error.message) || r.status));
  }
  refreshView();
  const again = list.querySelector('li.item[data-session-id="' + CSS.escape(s.session_id) + '"] a');
  if (again) again.focus();
}

async function archive(s, archived) {
  const r = await call("PATCH", api + "/" + encodeURIComponent(s.session_id), { archived: archived });
  if (!r.ok) return toast("Could not change it: " + ((r.data && r.data.error && r.data.error.message) || r.status));
  Object.assign(s, r.data);
  if (archived) recent = recent.filter((x) => x.session_id !== s.session_id);
  else if (!recent.some((x) => x.session_id === s.session_id)) recent.push(s);
  refreshView();
  toast(archived ? "Chat archived." : "Chat back in the list.", { label: "Undo", run: () => archive(s, !archived) });
}

function sendDelete(id, keepalive) {
  doomed.delete(id);
  return fetch(api + "/" + encodeURIComponent(id) + "?hide=true", {
    method: "DELETE",
    credentials: "same-origin",
    keepalive: !!keepalive,
    headers: { Accept: "application/json", "X-CSRFToken": csrfToken() },
  });
}

function remove(s) {
  const id = s.session_id;
  doomed.set(id, window.setTimeout(async () => {
    await sendDelete(id);
    recent = recent.filter((x) => x.session_id !== id);
    if (id === currentId()) window.location.assign("/");
  }, DELETE_AFTER));
  refreshView();
  toast("Chat deleted.", {
    label: "Undo",
    run: () => {
      window.clearTimeout(doomed.get(id));
      doomed.delete(id);
      refreshView();
    },
  }, DELETE_AFTER / 1000);
}

let lastResults = [];
function refreshView() {
  if (mode === "recent") showRecent();
  else render(lastResults, mode === "archived" ? "No archived chats." : "No chat matches.");
}

// main.js tells the list about a chat it created (the draft's first message) and about new titles.
export function sessionAdded(s) {
  recent = recent.filter((x) => x.session_id !== s.session_id);
  recent.push(s);
  if (mode === "recent") showRecent();
}
export function sessionTitle(id, title) {
  const s = recent.find((x) => x.session_id === id);
  if (s) s.title = title;
  if (mode === "recent") showRecent();
  if (id === currentId() && titleListener) titleListener(title);
}
// The open chat's title, when it changes here (main.js shows it in the header).
export function onTitle(listener) {
  titleListener = listener;
}

// Chats made, renamed, archived or deleted in another tab or by the API reach this list: it is asked
// for again when the page comes back into view or gets the focus, and every minute while it is seen
// (one GET; never while a title is being edited or a menu is open).
let syncing = false; // a tab coming back sends visibilitychange and focus: one GET for both
export async function syncSessions() {
  if (document.hidden || syncing || list.querySelector(".rename-inline, details.item-menu[open]")) return;
  syncing = true;
  try {
    const r = await call("GET", api + "?limit=" + SHOWN);
    if (!r.ok || list.querySelector(".rename-inline, details.item-menu[open]")) return;
    recent = r.data.results;
    if (mode === "recent") showRecent();
  } finally {
    syncing = false;
  }
}
const SHOWN = 100; // as many as the page draws (portal/views/chats.py SIDEBAR_SESSIONS)

const search = $("chat-search");
const archivedSwitch = $("show-archived");
let searchTimer = null;
async function runSearch() {
  const q = search.value.trim();
  const archived = archivedSwitch.getAttribute("aria-pressed") === "true";
  if (!q && !archived) return showRecent();
  mode = archived ? "archived" : "search";
  lastResults = await fetchList((q ? "q=" + encodeURIComponent(q) + "&" : "") + (archived ? "archived=true" : ""));
  refreshView();
}

// The chat list is on the home and chat pages (chat/_sessions.html); its controls are wired once, here.
function start() {
  list.replaceChildren(); // lit-html draws it from now on (the server drew the first view)
  (list.closest(".sidebar") || list).addEventListener("scroll", closeMovedMenus, { passive: true });
  window.addEventListener("resize", closeMenus);
  // Leaving the page within the Undo time: the deletion still happens.
  window.addEventListener("pagehide", () => { for (const id of Array.from(doomed.keys())) sendDelete(id, true); });
  search.addEventListener("input", () => { window.clearTimeout(searchTimer); searchTimer = window.setTimeout(runSearch, 250); });
  archivedSwitch.addEventListener("click", () => {
    const on = archivedSwitch.getAttribute("aria-pressed") !== "true";
    archivedSwitch.setAttribute("aria-pressed", String(on));
    archivedSwitch.textContent = on ? "Show recent chats" : "Show archived";
    runSearch();
  });
  drawer();
  document.addEventListener("visibilitychange", syncSessions);
  window.addEventListener("focus", syncSessions);
  window.setInterval(syncSessions, 60000);
  showRecent();
}

// The chat page's "Chats" button: a drawer on a phone, a collapsible column on wider screens.
function drawer() {
  const layout = $("chat-layout");
  const toggle = $("sidebar-toggle");
  if (!layout || !toggle) return;
  const sidebar = $("sidebar");
  const sync = () => {
    const visible = phone() ? layout.classList.contains("sidebar-open") : !layout.classList.contains("sidebar-collapsed");
    toggle.setAttribute("aria-expanded", String(visible));
  };
  let collapsed = false;
  try { collapsed = localStorage.getItem("agentsite:sidebar-collapsed") === "1"; } catch (e) { /* storage off */ }
  layout.classList.toggle("sidebar-collapsed", collapsed);
  toggle.addEventListener("click", () => {
    if (phone()) {
      layout.classList.toggle("sidebar-open");
      if (layout.classList.contains("sidebar-open")) search.focus();
    } else {
      const now = !layout.classList.contains("sidebar-collapsed");
      layout.classList.toggle("sidebar-collapsed", now);
      try { localStorage.setItem("agentsite:sidebar-collapsed", now ? "1" : ""); } catch (e) { /* storage off */ }
    }
    sync();
  });
  $("sidebar-close").addEventListener("click", () => { layout.classList.remove("sidebar-open"); sync(); toggle.focus(); });
  sidebar.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && layout.classList.contains("sidebar-open")) { layout.classList.remove("sidebar-open"); sync(); toggle.focus(); }
  });
  window.addEventListener("resize", sync);
  sync();
}

if (list) start();
