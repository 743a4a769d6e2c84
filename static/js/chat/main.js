// The chat view. One WebSocket per open chat; the server is the truth for the queue and confirmations.
//
// Loading a chat: stored history first (GET …/messages), then the socket with ?since=<a seq at or before the
// start of the active turn>. Replayed events of turns that history shows as finished are skipped (except
// an external agent's progress, which only events carry); the running turn is re-drawn from its `started`
// event, so a reload mid-turn shows it exactly where it is, with no duplicate and no gap. Events up to the
// `connected` frame's last_seq are history: they draw the transcript but never change the queue or the
// confirmations (the snapshot already says how those are).
//
// When the chat goes idle after a turn, the transcript is drawn again from the stored history (settle):
// the stored conversation is the truth, and this way what a reload shows is exactly what is on screen.
//
// A draft chat ("New chat", no session yet) creates its session with its first message.
//
// Nothing typed is lost (composer.js holds the text): a message over the server's limits is never sent;
// a message the server could not take (signed out, refused, a frame over its limit: close 1009) returns
// to the composer. Reconnects back off and never resend an oversized frame.
//
// The page's entry module (chat/chat.html loads it alone; it imports the rest). Its mutable state is one
// object, `state` (state.js), changed here only.
import { api as call } from "../api.js";
import { $, button, el } from "../dom.js";
import { toast } from "../toast.js";
import { createComposer } from "./composer.js";
import { createConfirmations } from "./confirm.js";
import { createFiles } from "./files.js";
import { createQueue } from "./queue.js";
import { createRenderer, derivedId } from "./render.js";
import { onTitle, sessionAdded, sessionTitle } from "./sidebar.js";
import { createChatState } from "./state.js";

const root = $("chat"); // always on chat/chat.html, the only page that loads this module
const state = createChatState(root);
const transcript = $("transcript");
const input = $("input");
const conn = $("conn");
const stopButton = $("cancel");
const announcer = $("announcer");
const modelSelect = $("model-select");
const approvalSelect = $("approval-select");
const api = () => "/api/v1/chat/sessions/" + encodeURIComponent(state.sessionId);
const startKey = () => "agentsite:run-start:" + state.sessionId;


function announce(text) {
  announcer.textContent = "";
  window.setTimeout(() => { announcer.textContent = text; }, 30);
}

function notice(text) {
  const box = $("notices");
  const item = el("div", "notice");
  item.setAttribute("role", "alert");
  item.appendChild(el("span", "", text));
  item.appendChild(button("Dismiss", () => item.remove(), "small"));
  box.appendChild(item);
  while (box.childElementCount > 3) box.firstElementChild.remove();
}

async function copy(text) {
  try {
    await navigator.clipboard.writeText(text);
    toast("Copied.");
  } catch (e) {
    toast("Copying is not allowed here.");
  }
}

const renderer = createRenderer(transcript, {
  open: () => !state.closed,
  copy: copy,
  edit: (id, text) => queueMessage(text, derivedId("edit", id)),
  again: (turnId) => {
    const text = state.contents.get(turnId);
    if (text) queueMessage(text, derivedId("again", turnId));
  },
  failure: (id) => state.failures.get(id) || null,
  failed: (id, error) => state.failures.set(id, error.message || error.code),
  remember: (id, text) => state.contents.set(id, text),
});

const confirmations = createConfirmations({
  reply: (confirmationId, approved, optionId) => {
    const frame = { type: "confirmation_reply", confirmation_id: confirmationId, approved: approved };
    if (optionId) frame.option_id = optionId;
    send(frame);
  },
  returnFocus: () => {
    const active = document.activeElement;
    if ((!active || active === document.body) && !input.disabled) input.focus();
  },
  announce: announce,
});

const queue = createQueue({
  send: (frame) => send(frame),
  contents: state.contents, // shared: the queue adds the texts that queued events carry
  closed: () => state.closed,
  pendingFrame: (id) => state.outbox.some((f) => f.message_id === id),
});
const running = () => queue.state.running;

const composer = createComposer({
  root: root,
  input: input,
  sessionId: () => state.sessionId,
  closed: () => state.closed,
  frame: (text) => choices({ type: "message", content: text, message_id: "x".repeat(32), steer: true }),
});

const files = createFiles({ sessionId: () => state.sessionId, layout: $("chat-layout"), toggle: $("files-toggle") });

function nearBottom() {
  return transcript.scrollHeight - transcript.scrollTop - transcript.clientHeight < 80;
}

// ------------------------------------------------------------------ history and settling

function loadHistory() {
  if (!state.sessionId) return Promise.resolve([]);
  return fetch(api() + "/messages?limit=500", { credentials: "same-origin", headers: { Accept: "application/json" } })
    .then((r) => (r.ok ? r.json() : { results: [] }))
    .then((data) => data.results || []);
}

function drawHistory(rows) {
  state.finishedInHistory = renderer.renderHistory(rows);
  for (const events of state.delegates.values()) events.forEach((ev) => renderer.delegateUpdate(ev));
  renderer.decorate();
}

function markSynced(on) {
  if (on) transcript.dataset.synced = "1";
  else delete transcript.dataset.synced;
}

function settleSoon() {
  window.clearTimeout(state.settleTimer);
  state.settleTimer = window.setTimeout(settle, 150);
}

function settle() {
  if (running() || state.held !== null || !state.sessionId) return;
  if (transcript.querySelector(".edit-form")) {
    state.settleTimer = window.setTimeout(settle, 1000); // never under the hands of someone editing
    return;
  }
  const at = state.epoch;
  loadHistory().then((rows) => {
    if (at !== state.epoch || running() || state.held !== null) return; // something new arrived: settle later
    const wasNear = nearBottom();
    const scroll = transcript.scrollTop;
    const openCalls = new Set(Array.from(transcript.querySelectorAll("details.tool[open]")).map((d) => d.dataset.callId));
    drawHistory(rows);
    transcript.querySelectorAll("details.tool").forEach((d) => { if (openCalls.has(d.dataset.callId)) d.open = true; });
    transcript.scrollTop = wasNear ? transcript.scrollHeight : scroll;
    markSynced(true);
  });
}

// A turn started that history did not know yet: fill its bubble from the stored row, a moment later.
function refetchSoon() {
  if (state.refetchTimer) return;
  state.refetchTimer = window.setTimeout(() => {
    state.refetchTimer = null;
    loadHistory().then((rows) => {
      for (const m of rows) {
        if (m.role !== "user") continue;
        state.contents.set(m.message_id, m.content);
        const li = $("u-" + m.message_id);
        if (li && li.dataset.placeholder) renderer.userBubble(m.message_id, m.content);
      }
      queue.render();
    });
  }, 150);
}

// The first message titles an untitled chat (server-side): show the title without a reload.
function fetchTitleSoon() {
  if (state.titleKnown || !state.sessionId) return;
  state.titleKnown = true;
  window.setTimeout(async () => {
    const r = await call("GET", api());
    if (r.ok && r.data.title) sessionTitle(state.sessionId, r.data.title);
    else state.titleKnown = false;
  }, 300);
}
function showTitle(title) {
  $("chat-title").textContent = title || "Untitled chat";
  $("chat-title").dataset.untitled = title ? "" : "1";
  document.title = (title || "Untitled chat") + " · agentsite";
  const field = $("rename-title");
  if (field) field.value = title;
}
onTitle(showTitle);

// ------------------------------------------------------------------ events

function handle(ev) {
  if (state.held !== null && ev.type !== "connected") {
    state.held.push(ev);
    return;
  }
  if (ev.type === "connected") {
    state.ready = true;
    state.liveFrom = ev.last_seq;
    if (state.lastSeq === null) state.lastSeq = 0;
    queue.snapshot(ev.snapshot);
    confirmations.replace(ev.snapshot ? ev.snapshot.confirmations : []);
    conn.textContent = "connected";
    conn.className = "badge ok";
    conn.title = "";
    resendUnacked(ev.snapshot || {});
    flushOutbox();
    if (state.lastSeq >= state.liveFrom && !running()) markSynced(true);
    return;
  }
  if (ev.type === "resync") {
    // Some events are gone: draw again from what is stored, and take the snapshot as the state.
    state.lastSeq = ev.last_seq;
    state.liveFrom = ev.last_seq;
    state.held = [];
    loadHistory().then((rows) => {
      drawHistory(rows);
      if (ev.snapshot) {
        queue.snapshot(ev.snapshot);
        confirmations.replace(ev.snapshot.confirmations);
      }
      const later = state.held;
      state.held = null;
      later.forEach(handle);
      if (!running()) markSynced(true);
    });
    return;
  }
  if (ev.type === "pong") return;
  if (ev.type === "error") return handleError(ev.data || {});
  if (typeof ev.seq === "number") {
    if (state.lastSeq !== null && ev.seq <= state.lastSeq) return; // seen already
    state.lastSeq = ev.seq;
  }
  const live = typeof ev.seq !== "number" || ev.seq > state.liveFrom;
  const wasNear = nearBottom();
  const changed = draw(ev, live);
  if (changed) {
    state.epoch += 1;
    markSynced(false);
    if (changed !== "text") renderer.decorate(); // text chunks leave the actions as they are
  }
  if (wasNear) transcript.scrollTop = transcript.scrollHeight;
  if (typeof ev.seq === "number" && ev.seq === state.liveFrom && !running()) markSynced(true); // replay done
}

function skipTurn(id) {
  return id !== undefined && id !== null && state.finishedInHistory.has(id);
}

// Returns whether the transcript changed ("text": only a text chunk was added).
function draw(ev, live) {
  switch (ev.type) {
    case "message_status": {
      if (state.unacked.delete(ev.message_id)) composer.save(); // stored: the browser's copy may go
      if (live) queue.status(ev);
      if (ev.status === "started") {
        try { localStorage.setItem(startKey(), String(ev.seq - 1)); } catch (e) { /* storage off */ }
        if (live) fetchTitleSoon();
        if (skipTurn(ev.message_id)) return false;
        const bubble = $("u-" + ev.message_id);
        if (bubble) {
          // History drew part of this running turn: drop that part, the replay draws all of it.
          while (bubble.nextElementSibling) bubble.nextElementSibling.remove();
          renderer.turns.delete(ev.message_id);
        } else {
          renderer.userBubble(ev.message_id, state.contents.get(ev.message_id));
          if (!state.contents.get(ev.message_id)) refetchSoon();
        }
        return true;
      }
      if (ev.status === "steered" && !$("u-" + ev.message_id)) {
        renderer.userBubble(ev.message_id, state.contents.get(ev.message_id), true);
        if (!state.contents.get(ev.message_id)) refetchSoon();
        return true;
      }
      return false;
    }
    case "delta":
      if (skipTurn(ev.message_id)) return false;
      renderer.appendText(ev.message_id, ev.content);
      return "text";
    case "thinking":
      if (skipTurn(ev.message_id)) return false;
      renderer.appendThinking(ev.message_id, ev.content);
      return "text";
    case "tool_call":
      if (skipTurn(ev.message_id)) return false;
      renderer.toolBlock(ev.message_id, ev.call_id, ev.name, ev.arguments);
      return true;
    case "tool_result":
      if (live && ["write_file", "shell", "delegate_external_agent"].includes(ev.name)) files.refreshSoon();
      if (skipTurn(ev.message_id)) return false;
      renderer.toolResult(ev.message_id, ev.call_id, ev.name, ev.output, ev.is_error);
      return true;
    case "delegate_update": {
      // Not stored: kept here, and drawn also for finished turns (the replay is all there is of it).
      const list = state.delegates.get(ev.call_id) || [];
      list.push(ev);
      state.delegates.set(ev.call_id, list);
      renderer.delegateUpdate(ev);
      return true;
    }
    case "final_answer":
      if (skipTurn(ev.message_id)) return false;
      renderer.setHtml(ev.message_id, ev.html, ev.content);
      return true;
    case "result": {
      const data = ev.data || {};
      if (data.error && ev.message_id) state.failures.set(ev.message_id, data.error.message || data.error.code);
      if (live) {
        queue.ended(data.status);
        announce(data.status === "completed" ? "The agent finished its answer." : "The turn ended: " + data.status + ". The queue is paused.");
        settleSoon();
      }
      if (!ev.message_id || skipTurn(ev.message_id)) return false;
      if (data.status === "error" && data.final_content && !renderer.lastPart(renderer.block(ev.message_id), "text")) {
        renderer.setHtml(ev.message_id, null, data.final_content);
      }
      renderer.finishTurn(ev.message_id, data.status, data.usage);
      return true;
    }
    case "confirmation_request":
      if (live && ev.data) confirmations.add(ev.data);
      return false;
    case "confirmation_resolved":
      if (live) confirmations.resolved(ev.confirmation_id);
      return false;
    default:
      return false;
  }
}

function handleError(data) {
  if (data.code === "duplicate_message_id" && state.unacked.delete(data.message_id)) return composer.save(); // stored before: fine
  if (data.code === "unavailable" || data.code === "owner_unavailable") {
    // For now only (a restart, an outage): a refused message goes again with its id; a socket that
    // cannot go on is closed next and reconnects.
    const frame = data.message_id && state.unacked.get(data.message_id);
    if (frame) {
      window.setTimeout(() => send(frame), 2000);
    } else {
      conn.textContent = "reconnecting…";
      conn.className = "badge warn";
      conn.title = data.message || "";
    }
    return;
  }
  if (data.code === "too_many_sockets") {
    // The account has as many sockets open as it may (other tabs, clients): say so and try again
    // slowly (close 4429), never in a tight loop.
    conn.textContent = "too many connections";
    conn.className = "badge bad";
    conn.title = data.message || "";
    notice(data.message || data.code);
    state.retryIn = 30000;
    return;
  }
  if (data.code === "unauthorized") return signOut(data.message);
  if (["not_found", "closed"].includes(data.code)) {
    conn.textContent = data.code === "closed" ? "closed" : data.message || data.code;
    conn.className = "badge bad";
    state.retry = -1;
    return;
  }
  if (data.message_id) {
    queue.refused(data.message_id);
    const frame = state.unacked.get(data.message_id);
    state.unacked.delete(data.message_id);
    if (frame) composer.restore(frame.content); // refused, not stored: the text goes back to the composer
  }
  notice(data.message || data.code || "error");
}

// ------------------------------------------------------------------ socket

function sinceParam() {
  if (state.lastSeq !== null) return state.lastSeq;
  let start = null;
  try { start = localStorage.getItem(startKey()); } catch (e) { /* storage off */ }
  return start !== null && /^\d+$/.test(start) ? Number(start) : 0;
}

function connect() {
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  const url = proto + "//" + location.host + "/api/v1/chat/ws/" + encodeURIComponent(state.sessionId) + "?since=" + sinceParam();
  state.socket = new WebSocket(url);
  state.socket.onopen = () => {
    window.clearTimeout(state.stableTimer);
    state.stableTimer = window.setTimeout(() => { state.retry = 0; state.oversizedCloses = 0; }, 10000);
  };
  state.socket.onmessage = (m) => {
    let ev;
    try { ev = JSON.parse(m.data); } catch (e) { return; }
    try { handle(ev); } catch (e) { console.error(e); }
  };
  state.socket.onclose = (e) => {
    state.ready = false;
    window.clearTimeout(state.stableTimer);
    if (state.retry < 0) return;
    if (e.code === 1009 && !frameTooLarge()) return;
    if (!state.retryIn) { // (a slow retry keeps saying why it waits)
      conn.textContent = "reconnecting…";
      conn.className = "badge warn";
    }
    // 0.5 s, 1 s, 2 s … 30 s (with jitter), until a socket has stayed open for 10 s.
    state.retry = Math.min(state.retry + 1, 7);
    window.setTimeout(connect, state.retryIn || Math.min(30000, 250 * 2 ** state.retry) * (0.8 + Math.random() * 0.4));
    state.retryIn = 0;
  };
}

// Close 1009: a frame was over the server's limit. The message that was (over the limit this page
// knows, or else the largest one in flight: the limit that closed may be a proxy's) never goes again:
// its text returns to the composer, and the socket reconnects (backing off). A 1009 that no frame of
// ours explains, twice in a row, stops reconnecting and says so.
function frameTooLarge() {
  const messages = [...new Set([...state.unacked.values(), ...state.outbox])].filter((f) => f.type === "message");
  const bytes = (f) => composer.frameBytes(f);
  let over = messages.filter((f) => bytes(f) > composer.limits.frame);
  if (!over.length && messages.length) over = [messages.reduce((a, b) => (bytes(a) >= bytes(b) ? a : b))];
  for (const frame of over) {
    const at = state.outbox.indexOf(frame);
    if (at >= 0) state.outbox.splice(at, 1);
    state.unacked.delete(frame.message_id);
    queue.refused(frame.message_id);
    composer.restore(frame.content);
  }
  const n = (x) => x.toLocaleString("en");
  if (over.length) {
    state.oversizedCloses = 0;
    notice("The message was not sent: at " + n(bytes(over[0])) + " bytes it is over what the server takes at once (" + n(composer.limits.frame) + " bytes). It is back in the composer.");
    return true;
  }
  state.oversizedCloses += 1;
  if (state.oversizedCloses < 2) return true;
  state.retry = -1;
  conn.textContent = "disconnected";
  conn.className = "badge bad";
  conn.title = "The server closed the connection twice for a frame over its size limit (close 1009).";
  notice("The connection was closed for a frame over the server's size limit (close 1009) and is not retried. Reload the page to connect again.");
  return false;
}

// The browser session ended: keep every message that did not reach the server, and offer to sign in
// (back to this chat afterwards).
function signOut(message) {
  state.signedOut = true;
  state.retry = -1;
  for (const frame of new Set([...state.outbox, ...state.unacked.values()])) {
    if (frame.type !== "message") continue;
    queue.refused(frame.message_id);
    composer.restore(frame.content);
  }
  state.outbox.length = 0;
  state.unacked.clear();
  conn.textContent = "signed out";
  conn.className = "badge bad";
  conn.title = message || "";
  let link = $("sign-in");
  if (!link) {
    link = el("a", "button small primary", "Sign in again");
    link.id = "sign-in";
    conn.after(link);
  }
  link.href = composer.signInUrl();
  notice((message || "You are signed out.") + " What you typed stays in the composer (and in this browser) until it is sent: sign in again to send it.");
}

function send(frame) {
  if (frame.type === "message") state.unacked.set(frame.message_id, frame);
  if (state.ready && state.socket && state.socket.readyState === WebSocket.OPEN) state.socket.send(JSON.stringify(frame));
  else state.outbox.push(frame);
}

// After a reconnect: a message whose acknowledgement never came goes again with its id, unless the
// snapshot shows it (a message stored and already answered is refused as a duplicate: handleError).
function resendUnacked(snapshot) {
  const known = new Set((snapshot.pending || []).map((p) => p.message_id));
  if (snapshot.active_message_id) known.add(snapshot.active_message_id);
  for (const [id, frame] of state.unacked) {
    if (known.has(id)) state.unacked.delete(id);
    else if (!state.outbox.includes(frame)) state.outbox.push(frame);
  }
}

function flushOutbox() {
  while (state.outbox.length && state.socket.readyState === WebSocket.OPEN) state.socket.send(JSON.stringify(state.outbox.shift()));
}

function newId() {
  if (window.crypto && crypto.randomUUID) return crypto.randomUUID().replace(/-/g, "");
  return Date.now().toString(36) + Math.random().toString(36).slice(2);
}

// ------------------------------------------------------------------ composing

// The header's choices travel with each message (docs/protocol.md §3.2): the model when it is not the
// agent's own, the approval mode always.
function choices(frame) {
  if (modelSelect && modelSelect.value && modelSelect.value !== root.dataset.defaultModel) frame.model = modelSelect.value;
  if (approvalSelect) frame.approval_mode = approvalSelect.value;
  return frame;
}

async function ensureSession() {
  if (state.sessionId) return true;
  const id = newId();
  const r = await call("POST", "/api/v1/chat/sessions", { agent_name: root.dataset.agent, session_id: id });
  if (!r.ok) {
    const error = (r.data && r.data.error) || {};
    if (r.status === 401 || ["unauthorized", "not_authenticated"].includes(error.code)) signOut(error.message);
    else notice("Could not start the chat: " + (error.message || r.status));
    return false;
  }
  composer.carry(() => { state.sessionId = r.data.session_id; });
  root.dataset.sessionId = state.sessionId;
  root.dataset.status = "open";
  history.replaceState(null, "", "/chat/" + encodeURIComponent(state.sessionId));
  if (approvalSelect && approvalSelect.value !== "ask") {
    await call("PATCH", api(), { approval_mode: approvalSelect.value });
  }
  sessionAdded(r.data);
  files.enable();
  rememberModel();
  $("close-chat").dataset.api = api();
  $("rename-form").dataset.api = api();
  document.querySelectorAll("[data-needs-session]").forEach((n) => { n.hidden = false; });
  connect();
  return true;
}

async function queueMessage(text, id) {
  if (!text.trim() || state.closed) return;
  const problem = composer.sizeProblem(text);
  if (problem) return notice(problem);
  if (state.signedOut) return composer.restore(text);
  id = id || newId();
  state.contents.set(id, text);
  const frame = choices({ type: "message", content: text, message_id: id });
  // Paused with nothing waiting: a new message is the obvious "go on", so it starts at once.
  const q = queue.state;
  if (q.paused && !q.running && q.pending.length === 0) frame.steer = true;
  if (q.running || q.pending.length) queue.sending(id, text);
  if (!(await ensureSession())) {
    queue.refused(id);
    return composer.restore(text);
  }
  send(frame);
}

function submit() {
  const text = input.value;
  if (!text.trim() || state.closed) return;
  const problem = composer.sizeProblem(text) || (state.signedOut && "You are signed out: sign in again to send this. It stays in the composer (and in this browser) until it is sent.");
  if (problem) return composer.refuse(problem, notice);
  composer.save(); // this copy stays in the browser until the server has the message (message_status)
  input.value = "";
  input.focus();
  queueMessage(text);
}

$("composer").addEventListener("submit", (e) => { e.preventDefault(); submit(); });
input.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); submit(); }
});
stopButton.addEventListener("click", () => send({ type: "cancel" }));
$("resume").addEventListener("click", () => {
  const first = queue.state.pending[0];
  if (first) send({ type: "steer", message_id: first.message_id });
});

// The model is remembered per chat in this browser; the approval mode on the server (PATCH).
function rememberModel() {
  if (!modelSelect || !state.sessionId) return;
  try { localStorage.setItem("agentsite:model:" + state.sessionId, modelSelect.value); } catch (e) { /* storage off */ }
}
if (modelSelect) {
  try {
    const kept = state.sessionId ? localStorage.getItem("agentsite:model:" + state.sessionId) : null;
    if (kept && Array.from(modelSelect.options).some((o) => o.value === kept)) modelSelect.value = kept;
  } catch (e) { /* storage off */ }
  modelSelect.addEventListener("change", rememberModel);
}
if (approvalSelect) {
  approvalSelect.addEventListener("change", async () => {
    if (!state.sessionId) return;
    const r = await call("PATCH", api(), { approval_mode: approvalSelect.value });
    if (!r.ok) notice("Could not save the approval mode: " + ((r.data && r.data.error && r.data.error.message) || r.status));
    else announce("Approval mode: " + approvalSelect.options[approvalSelect.selectedIndex].text + ".");
  });
}

// Rename in the header: the title changes in place (and in the list).
const renameForm = $("rename-form");
if (renameForm) {
  renameForm.addEventListener("api:done", (e) => {
    sessionTitle(state.sessionId, e.detail.title);
    showTitle(e.detail.title);
    renameForm.hidden = true;
    $("rename-open").setAttribute("aria-expanded", "false");
    $("rename-open").focus();
  });
}

// ------------------------------------------------------------------ start

loadHistory().then((rows) => {
  drawHistory(rows);
  queue.render();
  transcript.scrollTop = transcript.scrollHeight;
  if (!state.sessionId) {
    conn.textContent = "new chat";
    conn.className = "badge";
    markSynced(true);
    return;
  }
  files.restore();
  if (state.closed) {
    conn.textContent = "closed";
    conn.className = "badge";
    markSynced(true);
    return;
  }
  connect();
});
window.setInterval(() => { if (state.socket && state.socket.readyState === WebSocket.OPEN) state.socket.send('{"type":"ping"}'); }, 25000);
