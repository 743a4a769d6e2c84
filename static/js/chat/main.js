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
(function () {
  "use strict";
  const A = window.agentsiteChat;
  const root = document.getElementById("chat");
  if (!root || !A) return;
  const $ = (id) => document.getElementById(id);
  let sessionId = root.dataset.sessionId;
  let closed = root.dataset.status === "closed";
  const transcript = $("transcript");
  const input = $("input");
  const conn = $("conn");
  const stopButton = $("cancel");
  const announcer = $("announcer");
  const modelSelect = $("model-select");
  const approvalSelect = $("approval-select");
  const api = () => "/api/v1/chat/sessions/" + encodeURIComponent(sessionId);
  const startKey = () => "agentsite:run-start:" + sessionId;

  let socket = null;
  let retry = 0;
  let retryIn = 0; // when set: the next reconnect waits this long (ms) instead of the backoff
  let lastSeq = null; // highest seq applied
  let liveFrom = Infinity; // events with seq > liveFrom change queue state (set by `connected`)
  let finishedInHistory = new Set(); // turns whose whole output came from stored history
  const contents = new Map(); // message_id -> text the user typed (bubbles, the queue, regenerate)
  const failures = new Map(); // turn id -> the error message its `result` carried (history rows keep it too)
  const delegates = new Map(); // call_id -> the `delegate_update` events of that call (not stored)
  const outbox = []; // frames typed while the socket was down
  const unacked = new Map(); // message frames sent and not yet acknowledged: re-sent (same id) when refused for now
  let ready = false; // the socket is open and `connected` arrived
  let held = null; // events that arrive while a resync redraws from history
  let epoch = 0; // bumped by every event that draws: a settle started before it is dropped
  let settleTimer = null;
  let stableTimer = null; // a socket open this long resets the reconnect back-off
  let oversizedCloses = 0; // 1009 closes in a row that no frame of ours explains
  let signedOut = false; // the browser session ended: nothing is sent until the person signs in again

  function announce(text) {
    announcer.textContent = "";
    window.setTimeout(() => { announcer.textContent = text; }, 30);
  }

  function notice(text) {
    const box = $("notices");
    const item = A.el("div", "notice");
    item.setAttribute("role", "alert");
    item.appendChild(A.el("span", "", text));
    item.appendChild(A.button("Dismiss", () => item.remove(), "small"));
    box.appendChild(item);
    while (box.childElementCount > 3) box.firstElementChild.remove();
  }

  async function copy(text) {
    try {
      await navigator.clipboard.writeText(text);
      window.agentsiteToast("Copied.");
    } catch (e) {
      window.agentsiteToast("Copying is not allowed here.");
    }
  }

  const renderer = A.createRenderer(transcript, {
    open: () => !closed,
    copy: copy,
    edit: (id, text) => queueMessage(text, A.derivedId("edit", id)),
    again: (turnId) => {
      const text = contents.get(turnId);
      if (text) queueMessage(text, A.derivedId("again", turnId));
    },
    failure: (id) => failures.get(id) || null,
    failed: (id, error) => failures.set(id, error.message || error.code),
    remember: (id, text) => contents.set(id, text),
  });

  const confirmations = A.createConfirmations({
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

  const queue = A.createQueue({
    send: (frame) => send(frame),
    contents: contents,
    closed: () => closed,
    pendingFrame: (id) => outbox.some((f) => f.message_id === id),
  });
  const running = () => queue.state.running;

  const composer = A.createComposer({
    root: root,
    input: input,
    sessionId: () => sessionId,
    closed: () => closed,
    frame: (text) => choices({ type: "message", content: text, message_id: "x".repeat(32), steer: true }),
  });

  const files = A.createFiles({ sessionId: () => sessionId, layout: $("chat-layout"), toggle: $("files-toggle") });

  function nearBottom() {
    return transcript.scrollHeight - transcript.scrollTop - transcript.clientHeight < 80;
  }

  // ------------------------------------------------------------------ history and settling

  function loadHistory() {
    if (!sessionId) return Promise.resolve([]);
    return fetch(api() + "/messages?limit=500", { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then((r) => (r.ok ? r.json() : { results: [] }))
      .then((data) => data.results || []);
  }

  function drawHistory(rows) {
    finishedInHistory = renderer.renderHistory(rows);
    for (const events of delegates.values()) events.forEach((ev) => renderer.delegateUpdate(ev));
    renderer.decorate();
  }

  function markSynced(on) {
    if (on) transcript.dataset.synced = "1";
    else delete transcript.dataset.synced;
  }

  function settleSoon() {
    window.clearTimeout(settleTimer);
    settleTimer = window.setTimeout(settle, 150);
  }

  function settle() {
    if (running() || held !== null || !sessionId) return;
    if (transcript.querySelector(".edit-form")) {
      settleTimer = window.setTimeout(settle, 1000); // never under the hands of someone editing
      return;
    }
    const at = epoch;
    loadHistory().then((rows) => {
      if (at !== epoch || running() || held !== null) return; // something new arrived: settle later
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
  let refetchTimer = null;
  function refetchSoon() {
    if (refetchTimer) return;
    refetchTimer = window.setTimeout(() => {
      refetchTimer = null;
      loadHistory().then((rows) => {
        for (const m of rows) {
          if (m.role !== "user") continue;
          contents.set(m.message_id, m.content);
          const li = $("u-" + m.message_id);
          if (li && li.dataset.placeholder) renderer.userBubble(m.message_id, m.content);
        }
        queue.render();
      });
    }, 150);
  }

  // The first message titles an untitled chat (server-side): show the title without a reload.
  let titleKnown = $("chat-title").dataset.untitled !== "1";
  function fetchTitleSoon() {
    if (titleKnown || !sessionId) return;
    titleKnown = true;
    window.setTimeout(async () => {
      const r = await window.agentsiteApi("GET", api());
      if (r.ok && r.data.title) A.sessionTitle(sessionId, r.data.title);
      else titleKnown = false;
    }, 300);
  }
  A.onTitle = function (title) {
    $("chat-title").textContent = title || "Untitled chat";
    $("chat-title").dataset.untitled = title ? "" : "1";
    document.title = (title || "Untitled chat") + " · agentsite";
    const field = $("rename-title");
    if (field) field.value = title;
  };

  // ------------------------------------------------------------------ events

  function handle(ev) {
    if (held !== null && ev.type !== "connected") {
      held.push(ev);
      return;
    }
    if (ev.type === "connected") {
      ready = true;
      liveFrom = ev.last_seq;
      if (lastSeq === null) lastSeq = 0;
      queue.snapshot(ev.snapshot);
      confirmations.replace(ev.snapshot ? ev.snapshot.confirmations : []);
      conn.textContent = "connected";
      conn.className = "badge ok";
      conn.title = "";
      resendUnacked(ev.snapshot || {});
      flushOutbox();
      if (lastSeq >= liveFrom && !running()) markSynced(true);
      return;
    }
    if (ev.type === "resync") {
      // Some events are gone: draw again from what is stored, and take the snapshot as the state.
      lastSeq = ev.last_seq;
      liveFrom = ev.last_seq;
      held = [];
      loadHistory().then((rows) => {
        drawHistory(rows);
        if (ev.snapshot) {
          queue.snapshot(ev.snapshot);
          confirmations.replace(ev.snapshot.confirmations);
        }
        const later = held;
        held = null;
        later.forEach(handle);
        if (!running()) markSynced(true);
      });
      return;
    }
    if (ev.type === "pong") return;
    if (ev.type === "error") return handleError(ev.data || {});
    if (typeof ev.seq === "number") {
      if (lastSeq !== null && ev.seq <= lastSeq) return; // seen already
      lastSeq = ev.seq;
    }
    const live = typeof ev.seq !== "number" || ev.seq > liveFrom;
    const wasNear = nearBottom();
    const changed = draw(ev, live);
    if (changed) {
      epoch += 1;
      markSynced(false);
      if (changed !== "text") renderer.decorate(); // text chunks leave the actions as they are
    }
    if (wasNear) transcript.scrollTop = transcript.scrollHeight;
    if (typeof ev.seq === "number" && ev.seq === liveFrom && !running()) markSynced(true); // replay done
  }

  function skipTurn(id) {
    return id !== undefined && id !== null && finishedInHistory.has(id);
  }

  // Returns whether the transcript changed ("text": only a text chunk was added).
  function draw(ev, live) {
    switch (ev.type) {
      case "message_status": {
        if (unacked.delete(ev.message_id)) composer.save(); // stored: the browser's copy may go
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
            renderer.userBubble(ev.message_id, contents.get(ev.message_id));
            if (!contents.get(ev.message_id)) refetchSoon();
          }
          return true;
        }
        if (ev.status === "steered" && !$("u-" + ev.message_id)) {
          renderer.userBubble(ev.message_id, contents.get(ev.message_id), true);
          if (!contents.get(ev.message_id)) refetchSoon();
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
        const list = delegates.get(ev.call_id) || [];
        list.push(ev);
        delegates.set(ev.call_id, list);
        renderer.delegateUpdate(ev);
        return true;
      }
      case "final_answer":
        if (skipTurn(ev.message_id)) return false;
        renderer.setHtml(ev.message_id, ev.html, ev.content);
        return true;
      case "result": {
        const data = ev.data || {};
        if (data.error && ev.message_id) failures.set(ev.message_id, data.error.message || data.error.code);
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
    if (data.code === "duplicate_message_id" && unacked.delete(data.message_id)) return composer.save(); // stored before: fine
    if (data.code === "unavailable" || data.code === "owner_unavailable") {
      // For now only (a restart, an outage): a refused message goes again with its id; a socket that
      // cannot go on is closed next and reconnects.
      const frame = data.message_id && unacked.get(data.message_id);
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
      retryIn = 30000;
      return;
    }
    if (data.code === "unauthorized") return signOut(data.message);
    if (["not_found", "closed"].includes(data.code)) {
      conn.textContent = data.code === "closed" ? "closed" : data.message || data.code;
      conn.className = "badge bad";
      retry = -1;
      return;
    }
    if (data.message_id) {
      queue.refused(data.message_id);
      const frame = unacked.get(data.message_id);
      unacked.delete(data.message_id);
      if (frame) composer.restore(frame.content); // refused, not stored: the text goes back to the composer
    }
    notice(data.message || data.code || "error");
  }

  // ------------------------------------------------------------------ socket

  function sinceParam() {
    if (lastSeq !== null) return lastSeq;
    let start = null;
    try { start = localStorage.getItem(startKey()); } catch (e) { /* storage off */ }
    return start !== null && /^\d+$/.test(start) ? Number(start) : 0;
  }

  function connect() {
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    const url = proto + "//" + location.host + "/api/v1/chat/ws/" + encodeURIComponent(sessionId) + "?since=" + sinceParam();
    socket = new WebSocket(url);
    socket.onopen = () => {
      window.clearTimeout(stableTimer);
      stableTimer = window.setTimeout(() => { retry = 0; oversizedCloses = 0; }, 10000);
    };
    socket.onmessage = (m) => {
      let ev;
      try { ev = JSON.parse(m.data); } catch (e) { return; }
      try { handle(ev); } catch (e) { console.error(e); }
    };
    socket.onclose = (e) => {
      ready = false;
      window.clearTimeout(stableTimer);
      if (retry < 0) return;
      if (e.code === 1009 && !frameTooLarge()) return;
      if (!retryIn) { // (a slow retry keeps saying why it waits)
        conn.textContent = "reconnecting…";
        conn.className = "badge warn";
      }
      // 0.5 s, 1 s, 2 s … 30 s (with jitter), until a socket has stayed open for 10 s.
      retry = Math.min(retry + 1, 7);
      window.setTimeout(connect, retryIn || Math.min(30000, 250 * 2 ** retry) * (0.8 + Math.random() * 0.4));
      retryIn = 0;
    };
  }

  // Close 1009: a frame was over the server's limit. The message that was (over the limit this page
  // knows, or else the largest one in flight: the limit that closed may be a proxy's) never goes again:
  // its text returns to the composer, and the socket reconnects (backing off). A 1009 that no frame of
  // ours explains, twice in a row, stops reconnecting and says so.
  function frameTooLarge() {
    const messages = [...new Set([...unacked.values(), ...outbox])].filter((f) => f.type === "message");
    const bytes = (f) => composer.frameBytes(f);
    let over = messages.filter((f) => bytes(f) > composer.limits.frame);
    if (!over.length && messages.length) over = [messages.reduce((a, b) => (bytes(a) >= bytes(b) ? a : b))];
    for (const frame of over) {
      const at = outbox.indexOf(frame);
      if (at >= 0) outbox.splice(at, 1);
      unacked.delete(frame.message_id);
      queue.refused(frame.message_id);
      composer.restore(frame.content);
    }
    const n = (x) => x.toLocaleString("en");
    if (over.length) {
      oversizedCloses = 0;
      notice("The message was not sent: at " + n(bytes(over[0])) + " bytes it is over what the server takes at once (" + n(composer.limits.frame) + " bytes). It is back in the composer.");
      return true;
    }
    oversizedCloses += 1;
    if (oversizedCloses < 2) return true;
    retry = -1;
    conn.textContent = "disconnected";
    conn.className = "badge bad";
    conn.title = "The server closed the connection twice for a frame over its size limit (close 1009).";
    notice("The connection was closed for a frame over the server's size limit (close 1009) and is not retried. Reload the page to connect again.");
    return false;
  }

  // The browser session ended: keep every message that did not reach the server, and offer to sign in
  // (back to this chat afterwards).
  function signOut(message) {
    signedOut = true;
    retry = -1;
    for (const frame of new Set([...outbox, ...unacked.values()])) {
      if (frame.type !== "message") continue;
      queue.refused(frame.message_id);
      composer.restore(frame.content);
    }
    outbox.length = 0;
    unacked.clear();
    conn.textContent = "signed out";
    conn.className = "badge bad";
    conn.title = message || "";
    let link = $("sign-in");
    if (!link) {
      link = A.el("a", "button small primary", "Sign in again");
      link.id = "sign-in";
      conn.after(link);
    }
    link.href = composer.signInUrl();
    notice((message || "You are signed out.") + " What you typed stays in the composer (and in this browser) until it is sent: sign in again to send it.");
  }

  function send(frame) {
    if (frame.type === "message") unacked.set(frame.message_id, frame);
    if (ready && socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(frame));
    else outbox.push(frame);
  }

  // After a reconnect: a message whose acknowledgement never came goes again with its id, unless the
  // snapshot shows it (a message stored and already answered is refused as a duplicate: handleError).
  function resendUnacked(snapshot) {
    const known = new Set((snapshot.pending || []).map((p) => p.message_id));
    if (snapshot.active_message_id) known.add(snapshot.active_message_id);
    for (const [id, frame] of unacked) {
      if (known.has(id)) unacked.delete(id);
      else if (!outbox.includes(frame)) outbox.push(frame);
    }
  }

  function flushOutbox() {
    while (outbox.length && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(outbox.shift()));
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
    if (sessionId) return true;
    const id = newId();
    const r = await window.agentsiteApi("POST", "/api/v1/chat/sessions", { agent_name: root.dataset.agent, session_id: id });
    if (!r.ok) {
      const error = (r.data && r.data.error) || {};
      if (r.status === 401 || ["unauthorized", "not_authenticated"].includes(error.code)) signOut(error.message);
      else notice("Could not start the chat: " + (error.message || r.status));
      return false;
    }
    composer.carry(() => { sessionId = r.data.session_id; });
    root.dataset.sessionId = sessionId;
    root.dataset.status = "open";
    history.replaceState(null, "", "/chat/" + encodeURIComponent(sessionId));
    if (approvalSelect && approvalSelect.value !== "ask") {
      await window.agentsiteApi("PATCH", api(), { approval_mode: approvalSelect.value });
    }
    if (A.sessionAdded) A.sessionAdded(r.data);
    files.enable();
    rememberModel();
    $("close-chat").dataset.api = api();
    $("rename-form").dataset.api = api();
    document.querySelectorAll("[data-needs-session]").forEach((n) => { n.hidden = false; });
    connect();
    return true;
  }

  async function queueMessage(text, id) {
    if (!text.trim() || closed) return;
    const problem = composer.sizeProblem(text);
    if (problem) return notice(problem);
    if (signedOut) return composer.restore(text);
    id = id || newId();
    contents.set(id, text);
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
    if (!text.trim() || closed) return;
    const problem = composer.sizeProblem(text) || (signedOut && "You are signed out: sign in again to send this. It stays in the composer (and in this browser) until it is sent.");
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
    if (!modelSelect || !sessionId) return;
    try { localStorage.setItem("agentsite:model:" + sessionId, modelSelect.value); } catch (e) { /* storage off */ }
  }
  if (modelSelect) {
    try {
      const kept = sessionId ? localStorage.getItem("agentsite:model:" + sessionId) : null;
      if (kept && Array.from(modelSelect.options).some((o) => o.value === kept)) modelSelect.value = kept;
    } catch (e) { /* storage off */ }
    modelSelect.addEventListener("change", rememberModel);
  }
  if (approvalSelect) {
    approvalSelect.addEventListener("change", async () => {
      if (!sessionId) return;
      const r = await window.agentsiteApi("PATCH", api(), { approval_mode: approvalSelect.value });
      if (!r.ok) notice("Could not save the approval mode: " + ((r.data && r.data.error && r.data.error.message) || r.status));
      else announce("Approval mode: " + approvalSelect.options[approvalSelect.selectedIndex].text + ".");
    });
  }

  // Rename in the header: the title changes in place (and in the list).
  const renameForm = $("rename-form");
  if (renameForm) {
    renameForm.addEventListener("api:done", (e) => {
      A.sessionTitle(sessionId, e.detail.title);
      A.onTitle(e.detail.title);
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
    if (!sessionId) {
      conn.textContent = "new chat";
      conn.className = "badge";
      markSynced(true);
      return;
    }
    files.restore();
    if (closed) {
      conn.textContent = "closed";
      conn.className = "badge";
      markSynced(true);
      return;
    }
    connect();
  });
  window.setInterval(() => { if (socket && socket.readyState === WebSocket.OPEN) socket.send('{"type":"ping"}'); }, 25000);
})();
