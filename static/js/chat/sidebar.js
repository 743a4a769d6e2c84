// The chat list (home and chat pages): grouped by day of last activity, searched on the server (title and
// content, GET /chat/sessions?q=), archived chats behind a switch; each chat can be renamed, archived or
// deleted. Delete waits a few seconds before it asks the server (DELETE …?hide=true, docs/protocol.md
// extensions "Sessions"), so Undo needs no server at all. On a phone the list is a drawer.
(function () {
  "use strict";
  const A = (window.agentsiteChat = window.agentsiteChat || {});
  const $ = (id) => document.getElementById(id);
  const list = $("sessions");
  if (!list) return;
  const api = "/api/v1/chat/sessions";
  const chatRoot = $("chat");
  const currentId = () => (chatRoot ? chatRoot.dataset.sessionId : "");
  const phone = () => window.matchMedia("(max-width: 760px)").matches;
  const DELETE_AFTER = 6000;
  const doomed = new Map(); // session id -> timer of its delayed DELETE

  // What the server drew: the recent chats, kept to come back to after a search.
  let recent = Array.from(list.querySelectorAll("li.item")).map((li) => ({
    session_id: li.dataset.sessionId,
    title: li.dataset.title,
    status: li.dataset.status,
    updated_at: li.dataset.updated,
    archived_at: null,
  }));
  let mode = "recent"; // recent | search | archived

  function dayLabel(date) {
    const start = (d) => new Date(d.getFullYear(), d.getMonth(), d.getDate()).getTime();
    const days = Math.round((start(new Date()) - start(date)) / 86400000);
    if (days <= 0) return "Today";
    if (days === 1) return "Yesterday";
    if (days < 7) return "Previous 7 days";
    if (days < 30) return "Previous 30 days";
    return date.toLocaleDateString(undefined, { month: "long", year: "numeric" });
  }

  function item(s) {
    const li = A.el("li", "item" + (s.status === "closed" ? " closed" : ""));
    li.dataset.sessionId = s.session_id;
    const title = s.title || "Untitled chat";
    const link = A.el("a", "", title);
    link.href = "/chat/" + encodeURIComponent(s.session_id);
    if (s.session_id === currentId()) link.setAttribute("aria-current", "page");
    li.appendChild(link);
    const menu = A.el("details", "item-menu");
    const summary = A.el("summary", "", "⋯");
    summary.setAttribute("aria-label", "Actions for " + title);
    menu.appendChild(summary);
    const box = A.el("div", "menu");
    box.appendChild(A.button("Rename", () => { menu.open = false; rename(li, s); }));
    box.appendChild(A.button(s.archived_at ? "Unarchive" : "Archive", () => { menu.open = false; archive(s, !s.archived_at); }));
    box.appendChild(A.button("Delete", () => { menu.open = false; remove(s); }, "danger"));
    menu.appendChild(box);
    menu.addEventListener("toggle", () => { if (menu.open) place(box, summary); });
    li.appendChild(menu);
    return li;
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
  }
  const closeMenus = () => list.querySelectorAll("details.item-menu[open]").forEach((d) => { d.open = false; });
  (list.closest(".sidebar") || list).addEventListener("scroll", closeMenus, { passive: true });
  window.addEventListener("resize", closeMenus);

  function render(sessions, emptyText) {
    const shown = sessions.filter((s) => !doomed.has(s.session_id));
    const time = (s) => Date.parse(s.updated_at) || 0;
    shown.sort((a, b) => time(b) - time(a));
    list.replaceChildren();
    let group = null;
    for (const s of shown) {
      const label = dayLabel(new Date(s.updated_at));
      if (label !== group) {
        group = label;
        list.appendChild(A.el("li", "group", label));
      }
      list.appendChild(item(s));
    }
    if (!shown.length) list.appendChild(A.el("li", "muted", emptyText));
  }

  async function fetchList(query) {
    const r = await window.agentsiteApi("GET", api + "?limit=100&" + query);
    return r.ok ? r.data.results : [];
  }

  function showRecent() {
    mode = "recent";
    render(recent, "No chats yet.");
  }

  async function rename(li, s) {
    const link = li.querySelector("a");
    const input = A.el("input", "rename-inline");
    input.value = s.title || "";
    input.maxLength = 200;
    input.setAttribute("aria-label", "New title for " + (s.title || "Untitled chat"));
    link.hidden = true;
    li.insertBefore(input, link);
    input.focus();
    input.select();
    let done = false;
    const finish = async (save) => {
      if (done) return;
      done = true;
      if (save && input.value.trim() !== (s.title || "")) {
        const r = await window.agentsiteApi("PATCH", api + "/" + encodeURIComponent(s.session_id), { title: input.value.trim() });
        if (r.ok) {
          s.title = r.data.title;
          A.sessionTitle(s.session_id, s.title);
        } else window.agentsiteToast("Could not rename it: " + ((r.data && r.data.error && r.data.error.message) || r.status));
      }
      input.remove();
      link.hidden = false;
      refreshView();
      const again = list.querySelector('li.item[data-session-id="' + CSS.escape(s.session_id) + '"] a');
      if (again) again.focus();
    };
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter") { e.preventDefault(); finish(true); }
      if (e.key === "Escape") { e.preventDefault(); finish(false); }
    });
    input.addEventListener("blur", () => finish(true));
  }

  async function archive(s, archived) {
    const r = await window.agentsiteApi("PATCH", api + "/" + encodeURIComponent(s.session_id), { archived: archived });
    if (!r.ok) return window.agentsiteToast("Could not change it: " + ((r.data && r.data.error && r.data.error.message) || r.status));
    Object.assign(s, r.data);
    if (archived) recent = recent.filter((x) => x.session_id !== s.session_id);
    else if (!recent.some((x) => x.session_id === s.session_id)) recent.push(s);
    refreshView();
    window.agentsiteToast(archived ? "Chat archived." : "Chat back in the list.", { label: "Undo", run: () => archive(s, !archived) });
  }

  function sendDelete(id, keepalive) {
    doomed.delete(id);
    return fetch(api + "/" + encodeURIComponent(id) + "?hide=true", {
      method: "DELETE",
      credentials: "same-origin",
      keepalive: !!keepalive,
      headers: { Accept: "application/json", "X-CSRFToken": document.querySelector('meta[name="csrf-token"]').content },
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
    window.agentsiteToast("Chat deleted.", {
      label: "Undo",
      run: () => {
        window.clearTimeout(doomed.get(id));
        doomed.delete(id);
        refreshView();
      },
    }, DELETE_AFTER / 1000);
  }
  // Leaving the page within the Undo time: the deletion still happens.
  window.addEventListener("pagehide", () => { for (const id of Array.from(doomed.keys())) sendDelete(id, true); });

  let lastResults = [];
  function refreshView() {
    if (mode === "recent") showRecent();
    else render(lastResults, mode === "archived" ? "No archived chats." : "No chat matches.");
  }

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
  search.addEventListener("input", () => { window.clearTimeout(searchTimer); searchTimer = window.setTimeout(runSearch, 250); });
  archivedSwitch.addEventListener("click", () => {
    const on = archivedSwitch.getAttribute("aria-pressed") !== "true";
    archivedSwitch.setAttribute("aria-pressed", String(on));
    archivedSwitch.textContent = on ? "Show recent chats" : "Show archived";
    runSearch();
  });

  // The chat page's "Chats" button: a drawer on a phone, a collapsible column on wider screens.
  const layout = $("chat-layout");
  const toggle = $("sidebar-toggle");
  if (layout && toggle) {
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

  // main.js tells the list about a chat it created (the draft's first message) and about new titles.
  A.sessionAdded = function (s) {
    recent = recent.filter((x) => x.session_id !== s.session_id);
    recent.push(s);
    if (mode === "recent") showRecent();
  };
  A.sessionTitle = function (id, title) {
    const s = recent.find((x) => x.session_id === id);
    if (s) s.title = title;
    if (mode === "recent") showRecent();
    if (id === currentId() && A.onTitle) A.onTitle(title);
  };

  // Chats made, renamed, archived or deleted in another tab or by the API reach this list: it is asked
  // for again when the page comes back into view or gets the focus, and every minute while it is seen
  // (one GET; never while a title is being edited or a menu is open).
  let syncing = false; // a tab coming back sends visibilitychange and focus: one GET for both
  async function syncRecent() {
    if (document.hidden || syncing || list.querySelector(".rename-inline, details.item-menu[open]")) return;
    syncing = true;
    try {
      const r = await window.agentsiteApi("GET", api + "?limit=" + SHOWN);
      if (!r.ok || list.querySelector(".rename-inline, details.item-menu[open]")) return;
      recent = r.data.results;
      if (mode === "recent") showRecent();
    } finally {
      syncing = false;
    }
  }
  const SHOWN = 100; // as many as the page draws (portal/views/chats.py SIDEBAR_SESSIONS)
  document.addEventListener("visibilitychange", syncRecent);
  window.addEventListener("focus", syncRecent);
  window.setInterval(syncRecent, 60000);
  A.syncSessions = syncRecent;

  showRecent();
})();
