// The chat view: one WebSocket per open chat, reconnecting with ?since= so no output is lost on refresh.
(function () {
  "use strict";
  const root = document.getElementById("chat");
  if (!root) return;
  const sessionId = root.dataset.sessionId;
  const transcript = document.getElementById("transcript");
  const input = document.getElementById("input");
  const form = document.getElementById("composer");
  const conn = document.getElementById("conn");
  const queueBox = document.getElementById("queue");
  const pendingList = document.getElementById("pending");
  const pausedNote = document.getElementById("paused");
  const storageKey = "agentsite:last_seq:" + sessionId;
  let socket = null;
  let lastSeq = null;
  let retry = 0;
  const turns = new Map(); // message_id -> {el, text}

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function scroll() { transcript.scrollTop = transcript.scrollHeight; }

  function userBubble(id, text) {
    if (document.getElementById("u-" + id)) return;
    const li = el("li", "msg user");
    li.id = "u-" + id;
    li.appendChild(el("div", "who", "You"));
    li.appendChild(el("div", "body", text));
    transcript.appendChild(li);
  }

  function turn(id) {
    let t = turns.get(id);
    if (!t) {
      const li = el("li", "msg assistant");
      li.appendChild(el("div", "who", "Agent"));
      const body = el("div", "body");
      li.appendChild(body);
      const meta = el("div", "meta");
      li.appendChild(meta);
      transcript.appendChild(li);
      t = { li, body, meta, text: "" };
      turns.set(id, t);
    }
    return t;
  }

  function renderSnapshot(snapshot) {
    if (!snapshot) return;
    pendingList.replaceChildren();
    for (const item of snapshot.pending) {
      const li = el("li");
      li.appendChild(el("span", "text", item.content));
      const steer = el("button", "", snapshot.running ? "Steer" : "Send now");
      steer.type = "button";
      steer.addEventListener("click", () => send({ type: "steer", message_id: item.message_id }));
      const remove = el("button", "", "Remove");
      remove.type = "button";
      remove.addEventListener("click", () => send({ type: "remove", message_id: item.message_id }));
      li.append(" ", steer, " ", remove);
      pendingList.appendChild(li);
    }
    queueBox.hidden = snapshot.pending.length === 0 && !snapshot.paused;
    pausedNote.hidden = !snapshot.paused;
  }

  let pending = [];
  let state = { running: false, paused: false, pending: [] };

  function applyStatus(ev) {
    if (ev.status === "queued" || ev.status === "restored") {
      pending = pending.filter((p) => p.message_id !== ev.message_id);
      pending.splice(ev.position ?? pending.length, 0, { message_id: ev.message_id, content: ev.content || (document.getElementById("u-" + ev.message_id)?.textContent) || "(queued message)", position: ev.position });
    } else {
      pending = pending.filter((p) => p.message_id !== ev.message_id);
    }
    if (ev.status === "started") { state.running = true; state.paused = false; }
    state.pending = pending;
    renderSnapshot(state);
  }

  function handle(ev) {
    if (typeof ev.seq === "number") {
      if (lastSeq !== null && ev.seq <= lastSeq) return; // already shown
      lastSeq = ev.seq;
      try { sessionStorage.setItem(storageKey, String(lastSeq)); } catch (e) { /* private mode */ }
    }
    switch (ev.type) {
      case "connected":
      case "resync":
        if (ev.type === "resync" || lastSeq === null) lastSeq = ev.last_seq;
        state = ev.snapshot || state;
        pending = (state.pending || []).slice();
        renderSnapshot(state);
        conn.textContent = "connected";
        break;
      case "message_status":
        applyStatus(ev);
        break;
      case "delta": {
        const t = turn(ev.message_id);
        t.text += ev.content;
        t.body.textContent = t.text;
        break;
      }
      case "thinking": {
        const t = turn(ev.message_id);
        let th = t.li.querySelector(".thinking");
        if (!th) { th = el("details", "thinking"); th.appendChild(el("summary", "", "Thinking")); th.appendChild(el("pre")); t.li.insertBefore(th, t.body); }
        th.querySelector("pre").textContent += ev.content;
        break;
      }
      case "tool_call":
      case "tool_result": {
        const t = turn(ev.message_id);
        const d = el("details", "tool" + (ev.is_error ? " error" : ""));
        d.appendChild(el("summary", "", (ev.type === "tool_call" ? "Tool call: " : "Tool result: ") + ev.name));
        d.appendChild(el("pre", "", ev.type === "tool_call" ? JSON.stringify(ev.arguments, null, 2) : ev.output));
        t.li.insertBefore(d, t.meta);
        break;
      }
      case "final_answer": {
        const t = turn(ev.message_id);
        t.text = ev.content;
        t.body.textContent = ev.content;
        break;
      }
      case "result": {
        state.running = false;
        if (ev.data && ev.data.status !== "completed") state.paused = true;
        const id = ev.message_id;
        if (id) {
          const t = turn(id);
          const usage = ev.data && ev.data.usage;
          let text = ev.data.status;
          if (ev.data.error) text += ": " + ev.data.error.message;
          if (usage && usage.total_tokens) text += " · " + usage.total_tokens + " tokens";
          t.meta.textContent = text;
        }
        renderSnapshot(state);
        break;
      }
      case "error":
        if (ev.data && (ev.data.code === "not_found" || ev.data.code === "closed" || ev.data.code === "unauthorized")) {
          conn.textContent = ev.data.message;
          retry = -1;
        } else {
          const li = el("li", "msg error", ev.data ? ev.data.message : "error");
          li.setAttribute("role", "alert");
          transcript.appendChild(li);
        }
        break;
    }
    scroll();
  }

  function connect() {
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    let since = lastSeq;
    if (since === null) {
      const stored = sessionStorage.getItem(storageKey);
      since = stored === null ? null : Number(stored);
    }
    const url = proto + "//" + location.host + "/api/v1/chat/ws/" + encodeURIComponent(sessionId) + (since !== null ? "?since=" + since : "?since=0");
    socket = new WebSocket(url);
    socket.onopen = () => { retry = 0; };
    socket.onmessage = (m) => { try { handle(JSON.parse(m.data)); } catch (e) { console.error(e); } };
    socket.onclose = () => {
      if (retry < 0) return;
      conn.textContent = "reconnecting…";
      retry = Math.min(retry + 1, 6);
      setTimeout(connect, 250 * 2 ** retry);
    };
  }

  function send(frame) {
    if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(frame));
  }

  function submit() {
    const text = input.value;
    if (!text.trim()) return;
    const id = (crypto.randomUUID ? crypto.randomUUID() : String(Date.now()) + Math.random()).replace(/-/g, "");
    userBubble(id, text);
    send({ type: "message", content: text, message_id: id });
    input.value = "";
  }

  form.addEventListener("submit", (e) => { e.preventDefault(); submit(); });
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); submit(); }
  });
  document.getElementById("cancel").addEventListener("click", () => send({ type: "cancel" }));
  document.getElementById("resume").addEventListener("click", () => {
    if (pending.length) send({ type: "steer", message_id: pending[0].message_id });
  });

  // History first (stored rows), then live events from the socket.
  fetch("/api/v1/chat/sessions/" + encodeURIComponent(sessionId) + "/messages", { credentials: "same-origin" })
    .then((r) => r.ok ? r.json() : { results: [] })
    .then((data) => {
      for (const m of data.results) {
        if (m.role === "user") userBubble(m.message_id, m.content);
        else if (m.role === "assistant" && m.content) {
          const t = turn(m.reply_to || m.message_id);
          t.text = m.content;
          t.body.textContent = m.content;
        }
      }
      lastSeq = null;
      sessionStorage.removeItem(storageKey);
      if (root.dataset.status !== "closed") connect(); else conn.textContent = "closed";
    });
})();
