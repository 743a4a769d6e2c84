// The chat view. One WebSocket per open chat; the server is the truth for the queue and confirmations.
//
// Loading a chat: stored history first (GET …/messages), then the socket with ?since=<a seq at or before the
// start of the active turn>. Replayed events of turns that history shows as finished are skipped; the
// running turn is re-drawn from its `started` event, so a reload mid-turn shows it exactly where it is,
// with no duplicate and no gap. Events up to the `connected` frame's last_seq are history: they draw the
// transcript but never change the queue or the confirmations (the snapshot already says how those are).
(function () {
  "use strict";
  const root = document.getElementById("chat");
  if (!root) return;
  const sessionId = root.dataset.sessionId;
  const closed = root.dataset.status === "closed";
  const $ = (id) => document.getElementById(id);
  const transcript = $("transcript");
  const input = $("input");
  const form = $("composer");
  const conn = $("conn");
  const runState = $("run-state");
  const stopButton = $("cancel");
  const queueBox = $("queue");
  const pendingList = $("pending");
  const pausedNote = $("paused");
  const composerHint = $("composer-hint");
  const announcer = $("announcer");
  const dialog = $("confirm");
  const reviewButton = $("review-approval");
  const api = "/api/v1/chat/sessions/" + encodeURIComponent(sessionId);
  const startKey = "agentsite:run-start:" + sessionId;
  const FINISHED = new Set(["completed", "cancelled", "error", "interrupted", "closed"]);

  let socket = null;
  let retry = 0;
  let lastSeq = null; // highest seq applied
  let liveFrom = Infinity; // events with seq > liveFrom change queue state (set by `connected`)
  let finishedInHistory = new Set(); // turns whose whole output came from stored history
  const contents = new Map(); // message_id -> text the user typed (for bubbles and the queue list)
  const turns = new Map(); // message_id -> {usage, tools: Map(call_id -> block)}
  const outbox = []; // frames typed while the socket was down
  let state = { running: false, paused: false, active_message_id: null, pending: [] };
  let confirmations = new Map(); // confirmation_id -> data
  let shownConfirmation = null;
  let refetchTimer = null;
  let ready = false; // the socket is open and `connected` arrived
  let held = null; // events that arrive while a resync redraws from history

  // ------------------------------------------------------------------ DOM helpers

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  function button(label, onClick, cls) {
    const b = el("button", cls || "", label);
    b.type = "button";
    b.addEventListener("click", onClick);
    return b;
  }

  function nearBottom() {
    return transcript.scrollHeight - transcript.scrollTop - transcript.clientHeight < 80;
  }

  function keepScrolled(wasNear) {
    if (wasNear) transcript.scrollTop = transcript.scrollHeight;
  }

  function announce(text) {
    announcer.textContent = "";
    window.setTimeout(() => { announcer.textContent = text; }, 30);
  }

  // ------------------------------------------------------------------ transcript model
  // The transcript is a flat list: user bubbles and assistant blocks. A turn's output goes into the last
  // block when that block belongs to the turn, else into a new one (a steered message splits a turn).
  // Inside a block the same rule holds for parts: text streams into the last part when it is text.

  function turn(id) {
    let t = turns.get(id);
    if (!t) {
      t = { usage: null, tools: new Map() };
      turns.set(id, t);
    }
    return t;
  }

  function userBubble(id, text, steered) {
    const existing = $("u-" + id);
    if (existing) {
      if (text && existing.dataset.placeholder) {
        existing.querySelector(".body").textContent = text;
        delete existing.dataset.placeholder;
      }
      return existing;
    }
    const li = el("li", "msg user");
    li.id = "u-" + id;
    const who = el("div", "who", "You");
    if (steered) who.appendChild(el("span", "badge", "steered"));
    li.appendChild(who);
    li.appendChild(el("div", "body", text || "…"));
    if (!text) li.dataset.placeholder = "1";
    transcript.appendChild(li);
    return li;
  }

  function block(id) {
    const last = transcript.lastElementChild;
    if (last && last.classList.contains("assistant") && last.dataset.turn === id) return last;
    const li = el("li", "msg assistant");
    li.dataset.turn = id;
    li.appendChild(el("div", "who", "Agent"));
    li.appendChild(el("div", "parts"));
    const meta = el("div", "meta");
    li.appendChild(meta);
    transcript.appendChild(li);
    return li;
  }

  function lastPart(li, cls) {
    const parts = li.querySelector(".parts");
    const last = parts.lastElementChild;
    if (last && last.classList.contains(cls)) return last;
    return null;
  }

  function addPart(li, node) {
    li.querySelector(".parts").appendChild(node);
    return node;
  }

  function appendText(id, chunk) {
    const li = block(id);
    let part = lastPart(li, "text");
    if (!part || part.dataset.final) part = addPart(li, el("div", "text streaming"));
    part.textContent += chunk;
  }

  function setHtml(id, html, text) {
    const li = block(id);
    let part = lastPart(li, "text");
    if (part && !part.dataset.final && text && part.textContent !== text && part.textContent.endsWith(text)) {
      // Deltas of an earlier model step (one without tool calls, e.g. before a steer) ran into this
      // part: keep them as they were, the final answer is the last step's text only.
      part.textContent = part.textContent.slice(0, -text.length);
      part.classList.remove("streaming");
      part.dataset.final = "1";
      part = null;
    }
    if (!part) part = addPart(li, el("div", "text"));
    part.classList.remove("streaming");
    part.classList.add("markdown");
    part.dataset.final = "1";
    if (html !== undefined && html !== null) part.innerHTML = html; // sanitised on the server (chat/markdown.py)
    else part.textContent = text || "";
    if (window.agentsiteHighlight) window.agentsiteHighlight(part);
  }

  function appendThinking(id, chunk) {
    const li = block(id);
    let part = lastPart(li, "thinking");
    if (!part) {
      part = addPart(li, el("details", "thinking"));
      part.appendChild(el("summary", "", "Thinking"));
      part.appendChild(el("pre"));
    }
    part.querySelector("pre").textContent += chunk;
  }

  function argumentsText(args) {
    if (typeof args === "string") {
      try { return JSON.stringify(JSON.parse(args), null, 2); } catch (e) { return args; }
    }
    return JSON.stringify(args, null, 2);
  }

  function toolBlock(id, callId, name, args) {
    const t = turn(id);
    let d = callId ? t.tools.get(callId) : null;
    if (d) return d;
    d = addPart(block(id), el("details", "tool"));
    const summary = el("summary");
    summary.appendChild(el("span", "tool-name", "Tool: " + name));
    const status = el("span", "badge tool-status", "running");
    summary.append(" ", status);
    d.appendChild(summary);
    d.appendChild(el("div", "label", "Arguments"));
    d.appendChild(el("pre", "args", argumentsText(args)));
    if (callId) t.tools.set(callId, d);
    return d;
  }

  function toolResult(id, callId, name, output, isError) {
    const d = toolBlock(id, callId, name, {});
    let pre = d.querySelector("pre.output");
    if (!pre) {
      d.appendChild(el("div", "label", "Result"));
      pre = d.appendChild(el("pre", "output"));
    }
    pre.textContent = output;
    d.classList.toggle("error", !!isError);
    const status = d.querySelector(".tool-status");
    status.textContent = isError ? "error" : "done";
  }

  function delegateUpdate(ev) {
    const d = toolBlock(ev.message_id, ev.call_id, "delegate_external_agent", {});
    let log = d.querySelector(".delegate");
    if (!log) {
      const box = el("div", "delegate-box");
      box.appendChild(el("div", "label", "Progress from " + (ev.runner || "the external agent")));
      log = box.appendChild(el("ol", "delegate"));
      log.setAttribute("aria-label", "External agent progress");
      d.insertBefore(box, d.querySelector("pre.args").nextSibling);
      d.open = true;
    }
    const u = ev.update || {};
    const last = log.lastElementChild;
    if ((u.kind === "message" || u.kind === "thought") && last && last.dataset.kind === u.kind) {
      last.querySelector(".t").textContent += u.text || "";
      return;
    }
    const item = el("li", "upd " + (u.kind || ""));
    item.dataset.kind = u.kind || "";
    const label = { message: "says", thought: "thinks", tool_call: "tool", tool_call_update: "tool", plan: "plan" }[u.kind] || u.kind;
    item.appendChild(el("span", "k", label));
    item.append(" ");
    const text = [u.title, u.text].filter(Boolean).join(": ");
    item.appendChild(el("span", "t", text));
    if (u.status) item.append(" ", el("span", "badge", u.status));
    log.appendChild(item);
  }

  function usageText(usage) {
    if (!usage) return "";
    const parts = [];
    if (usage.prompt_tokens !== undefined) parts.push(usage.prompt_tokens + " in");
    if (usage.completion_tokens !== undefined) parts.push(usage.completion_tokens + " out");
    const total = usage.total_tokens !== undefined ? usage.total_tokens : null;
    return (total !== null ? total + " tokens" : "tokens") + (parts.length ? " (" + parts.join(", ") + ")" : "");
  }

  function setMeta(id, status, usage, error) {
    const li = block(id);
    const all = transcript.querySelectorAll('li.assistant[data-turn="' + CSS.escape(id) + '"]');
    all.forEach((b) => b.querySelectorAll(".text.streaming").forEach((p) => p.classList.remove("streaming")));
    li.querySelectorAll(".tool-status").forEach((s) => { if (s.textContent === "running") s.textContent = "not finished"; });
    const meta = li.querySelector(".meta");
    const bits = [];
    if (status && status !== "completed") bits.push(status);
    if (error) bits.push(error);
    const u = usageText(usage);
    if (u) bits.push(u);
    meta.textContent = bits.join(" · ");
    li.classList.toggle("failed", status === "error" || status === "interrupted");
    li.classList.toggle("cancelled", status === "cancelled");
  }

  function addUsage(total, step) {
    if (!step) return total;
    const out = Object.assign({}, total || {});
    for (const k of Object.keys(step)) if (typeof step[k] === "number") out[k] = (out[k] || 0) + step[k];
    return out;
  }

  // ------------------------------------------------------------------ history

  function renderHistory(rows) {
    transcript.replaceChildren();
    turns.clear();
    finishedInHistory = new Set();
    const userStatus = new Map();
    let current = null;
    for (const m of rows) {
      if (m.role === "user") {
        contents.set(m.message_id, m.content);
        userBubble(m.message_id, m.content, m.status === "steered");
        if (m.status !== "steered") {
          current = m.message_id;
          userStatus.set(current, m.status);
          if (FINISHED.has(m.status)) finishedInHistory.add(current);
        }
      } else if (m.role === "assistant") {
        const id = m.reply_to || current || m.message_id;
        if (m.content) setHtml(id, m.html, m.content);
        for (const call of m.tool_calls || []) {
          const fn = call.function || {};
          toolBlock(id, call.id, fn.name || "tool", fn.arguments || "");
        }
        if (m.usage) turn(id).usage = addUsage(turn(id).usage, m.usage);
      } else if (m.role === "tool") {
        const id = m.reply_to || current || m.message_id;
        toolResult(id, m.tool_call_id, "tool", m.content, m.status === "error");
      } else if (m.role === "system" && m.content) {
        transcript.appendChild(el("li", "msg system", m.content));
      }
    }
    for (const [id, status] of userStatus) {
      if (FINISHED.has(status)) {
        // the turn's last block carries the meta line
        const blocks = transcript.querySelectorAll('li.assistant[data-turn="' + CSS.escape(id) + '"]');
        const usage = turns.get(id) ? turns.get(id).usage : null;
        if (blocks.length) metaOn(blocks[blocks.length - 1], status, usage);
        else if (status !== "completed") {
          const li = block(id);
          metaOn(li, status, null);
        }
      }
    }
    transcript.scrollTop = transcript.scrollHeight;
  }

  function metaOn(li, status, usage) {
    const meta = li.querySelector(".meta");
    const bits = [];
    if (status !== "completed") bits.push(status);
    const u = usageText(usage);
    if (u) bits.push(u);
    meta.textContent = bits.join(" · ");
  }

  function loadHistory() {
    return fetch(api + "/messages?limit=500", { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then((r) => (r.ok ? r.json() : { results: [] }))
      .then((data) => data.results || []);
  }

  // A turn started that history did not know yet: fill its bubble from the stored row, a moment later.
  function refetchSoon() {
    if (refetchTimer) return;
    refetchTimer = window.setTimeout(() => {
      refetchTimer = null;
      loadHistory().then((rows) => {
        for (const m of rows) {
          if (m.role !== "user") continue;
          contents.set(m.message_id, m.content);
          const li = $("u-" + m.message_id);
          if (li && li.dataset.placeholder) userBubble(m.message_id, m.content);
        }
        renderQueue();
      });
    }, 150);
  }

  // ------------------------------------------------------------------ queue and run state

  function renderQueue() {
    const paused = state.paused && !state.running;
    pendingList.replaceChildren();
    state.pending.forEach((item, index) => {
      const li = el("li", "pending-item");
      li.dataset.messageId = item.message_id;
      const text = item.content || contents.get(item.message_id) || "(message)";
      const label = el("span", "text", text);
      label.id = "pending-text-" + item.message_id;
      li.appendChild(label);
      const actions = el("span", "pending-actions");
      if (item.sending) {
        actions.appendChild(el("span", "muted", "sending…"));
      } else {
        if (state.running) {
          const b = button(item.steer_requested ? "Steering…" : "Steer", () => send({ type: "steer", message_id: item.message_id }));
          b.setAttribute("aria-describedby", label.id);
          b.title = "Hand this message to the running turn now";
          b.disabled = !!item.steer_requested;
          actions.appendChild(b);
        } else if (paused) {
          const b = button("Send now", () => send({ type: "steer", message_id: item.message_id }), index === 0 ? "primary" : "");
          b.setAttribute("aria-describedby", label.id);
          actions.appendChild(b);
        }
        const r = button("Remove", () => send({ type: "remove", message_id: item.message_id }));
        r.setAttribute("aria-describedby", label.id);
        actions.appendChild(r);
      }
      li.appendChild(actions);
      pendingList.appendChild(li);
    });
    queueBox.hidden = state.pending.length === 0 && !paused;
    $("queue-count").textContent = state.pending.length ? "(" + state.pending.length + ")" : "";
    pausedNote.hidden = !paused;
    $("resume").hidden = state.pending.length === 0;
    $("paused-empty").hidden = state.pending.length !== 0;
    stopButton.disabled = !state.running;
    transcript.setAttribute("aria-busy", state.running ? "true" : "false");
    root.classList.toggle("running", state.running);
    runState.textContent = state.running ? "Agent is working…" : paused ? "Paused" : "";
    if (closed) composerHint.textContent = "This chat is closed.";
    else if (state.running) composerHint.textContent = "New messages wait in the queue; Steer hands one to the running turn.";
    else if (paused && state.pending.length) composerHint.textContent = "Paused: new messages join the queue until you resume.";
    else if (paused) composerHint.textContent = "Paused: your next message starts a new turn.";
    else composerHint.textContent = "Enter sends, Shift+Enter makes a new line.";
  }

  function applySnapshot(snapshot) {
    if (!snapshot) return;
    const optimistic = state.pending.filter((p) => p.sending && outbox.some((f) => f.message_id === p.message_id));
    state = {
      running: !!snapshot.running,
      paused: !!snapshot.paused,
      active_message_id: snapshot.active_message_id || null,
      pending: (snapshot.pending || []).map((p) => Object.assign({}, p)),
    };
    for (const p of state.pending) contents.set(p.message_id, p.content);
    state.pending.push(...optimistic);
    confirmations = new Map((snapshot.confirmations || []).map((c) => [c.confirmation_id, c]));
    renderQueue();
    showNextConfirmation();
  }

  function dropPending(id) {
    state.pending = state.pending.filter((p) => p.message_id !== id);
  }

  function applyStatus(ev) {
    const id = ev.message_id;
    if (ev.status === "queued" || ev.status === "restored") {
      const old = state.pending.find((p) => p.message_id === id);
      dropPending(id);
      const at = typeof ev.position === "number" ? Math.min(ev.position, state.pending.length) : state.pending.length;
      state.pending.splice(at, 0, { message_id: id, content: contents.get(id) || "", position: at, steer_requested: old ? !!old.steer_requested && ev.status === "queued" : false });
    } else {
      dropPending(id);
      if (ev.status === "started") {
        state.running = true;
        state.paused = false;
        state.active_message_id = id;
      }
    }
    renderQueue();
  }

  // ------------------------------------------------------------------ confirmations

  function showNextConfirmation() {
    if (shownConfirmation && !confirmations.has(shownConfirmation)) closeDialog();
    const next = confirmations.values().next();
    reviewButton.hidden = next.done || (dialog.open && shownConfirmation !== null);
    if (next.done || dialog.open) return;
    openDialog(next.value);
  }

  function openDialog(data) {
    shownConfirmation = data.confirmation_id;
    const acp = data.kind === "acp_permission";
    $("confirm-title").textContent = (acp ? "The external agent asks: " : "Allow ") + (data.tool || "this tool") + (acp ? "" : "?");
    $("confirm-reason").textContent = data.reason || "";
    const hasCommand = typeof data.command === "string" && data.command !== "";
    $("confirm-command-label").textContent = hasCommand ? "Command" : "Arguments";
    $("confirm-command").textContent = hasCommand ? data.command : argumentsText(data.arguments || {});
    const actions = $("confirm-actions");
    actions.replaceChildren();
    let safeChoice = null;
    if (acp && Array.isArray(data.options) && data.options.length) {
      for (const option of data.options) {
        const allow = String(option.kind || "").startsWith("allow");
        const b = button(option.name || option.option_id, () => reply(data.confirmation_id, allow, option.option_id), allow ? "primary" : "");
        b.dataset.optionId = option.option_id;
        actions.appendChild(b);
        if (!allow && !safeChoice) safeChoice = b;
      }
    } else {
      safeChoice = button("Refuse", () => reply(data.confirmation_id, false));
      safeChoice.classList.add("refuse");
      actions.append(safeChoice, button("Approve", () => reply(data.confirmation_id, true), "primary approve"));
    }
    if (!dialog.open) {
      dialog.dataset.returnFocus = document.activeElement && document.activeElement.id ? document.activeElement.id : "input";
      dialog.showModal();
    }
    (safeChoice || actions.firstElementChild).focus(); // the safe answer has the focus: Enter never approves by accident
    reviewButton.hidden = true;
  }

  function closeDialog() {
    shownConfirmation = null;
    if (dialog.open) dialog.close();
  }

  function reply(confirmationId, approved, optionId) {
    const frame = { type: "confirmation_reply", confirmation_id: confirmationId, approved: approved };
    if (optionId) frame.option_id = optionId;
    send(frame);
    $("confirm-actions").querySelectorAll("button").forEach((b) => { b.disabled = true; });
  }

  dialog.addEventListener("close", () => {
    if (dialog.open) return; // the next confirmation is already showing
    const back = $(dialog.dataset.returnFocus || "input") || input;
    shownConfirmation = null;
    reviewButton.hidden = confirmations.size === 0;
    if (back && !back.disabled) back.focus();
    if (confirmations.size && !reviewButton.hidden) announce("An approval is still waiting. Use Review approval to answer it.");
  });
  reviewButton.addEventListener("click", () => {
    const next = confirmations.values().next();
    if (!next.done) openDialog(next.value);
  });

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
      applySnapshot(ev.snapshot);
      conn.textContent = "connected";
      conn.className = "badge ok";
      flushOutbox();
      return;
    }
    if (ev.type === "resync") {
      // Some events are gone: draw again from what is stored, and take the snapshot as the state.
      lastSeq = ev.last_seq;
      liveFrom = ev.last_seq;
      held = [];
      loadHistory().then((rows) => {
        renderHistory(rows);
        if (ev.snapshot) applySnapshot(ev.snapshot);
        const later = held;
        held = null;
        later.forEach(handle);
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
    draw(ev, live);
    keepScrolled(wasNear);
  }

  function skipTurn(id) {
    return id !== undefined && id !== null && finishedInHistory.has(id);
  }

  function draw(ev, live) {
    switch (ev.type) {
      case "message_status": {
        if (live) applyStatus(ev);
        if (ev.status === "started") {
          try { localStorage.setItem(startKey, String(ev.seq - 1)); } catch (e) { /* storage off */ }
          if (skipTurn(ev.message_id)) return;
          const bubble = $("u-" + ev.message_id);
          if (bubble) {
            // History drew part of this running turn: drop that part, the replay draws all of it.
            while (bubble.nextElementSibling) bubble.nextElementSibling.remove();
            turns.delete(ev.message_id);
          } else {
            userBubble(ev.message_id, contents.get(ev.message_id));
            if (!contents.get(ev.message_id)) refetchSoon();
          }
        } else if (ev.status === "steered") {
          if (!$("u-" + ev.message_id)) {
            userBubble(ev.message_id, contents.get(ev.message_id), true);
            if (!contents.get(ev.message_id)) refetchSoon();
          }
        }
        return;
      }
      case "delta":
        if (!skipTurn(ev.message_id)) appendText(ev.message_id, ev.content);
        return;
      case "thinking":
        if (!skipTurn(ev.message_id)) appendThinking(ev.message_id, ev.content);
        return;
      case "tool_call":
        if (!skipTurn(ev.message_id)) toolBlock(ev.message_id, ev.call_id, ev.name, ev.arguments);
        return;
      case "tool_result":
        if (!skipTurn(ev.message_id)) toolResult(ev.message_id, ev.call_id, ev.name, ev.output, ev.is_error);
        return;
      case "delegate_update":
        if (!skipTurn(ev.message_id)) delegateUpdate(ev);
        return;
      case "final_answer":
        if (!skipTurn(ev.message_id)) setHtml(ev.message_id, ev.html, ev.content);
        return;
      case "result": {
        const data = ev.data || {};
        if (live) {
          state.running = false;
          state.active_message_id = null;
          if (data.status !== "completed") state.paused = true;
          renderQueue();
          announce(data.status === "completed" ? "The agent finished its answer." : "The turn ended: " + data.status + ". The queue is paused.");
        }
        if (ev.message_id && !skipTurn(ev.message_id)) {
          if (data.status === "error" && data.final_content && !lastPart(block(ev.message_id), "text")) {
            setHtml(ev.message_id, null, data.final_content);
          }
          setMeta(ev.message_id, data.status, data.usage, data.error ? data.error.message : null);
        }
        return;
      }
      case "confirmation_request":
        if (live && ev.data) {
          confirmations.set(ev.data.confirmation_id, ev.data);
          showNextConfirmation();
        }
        return;
      case "confirmation_resolved":
        if (live) {
          confirmations.delete(ev.confirmation_id);
          if (shownConfirmation === ev.confirmation_id) closeDialog();
          showNextConfirmation();
          reviewButton.hidden = confirmations.size === 0;
        }
        return;
      default:
        return;
    }
  }

  function handleError(data) {
    if (["not_found", "closed", "unauthorized"].includes(data.code)) {
      conn.textContent = data.code === "closed" ? "closed" : data.message || data.code;
      conn.className = "badge bad";
      retry = -1;
      return;
    }
    if (data.message_id) {
      const p = state.pending.find((x) => x.message_id === data.message_id && x.sending);
      if (p) { dropPending(data.message_id); renderQueue(); }
    }
    const li = el("li", "msg error", data.message || data.code || "error");
    li.setAttribute("role", "alert");
    transcript.appendChild(li);
    transcript.scrollTop = transcript.scrollHeight;
  }

  // ------------------------------------------------------------------ socket

  function sinceParam() {
    if (lastSeq !== null) return lastSeq;
    let start = null;
    try { start = localStorage.getItem(startKey); } catch (e) { /* storage off */ }
    return start !== null && /^\d+$/.test(start) ? Number(start) : 0;
  }

  function connect() {
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    const url = proto + "//" + location.host + "/api/v1/chat/ws/" + encodeURIComponent(sessionId) + "?since=" + sinceParam();
    socket = new WebSocket(url);
    socket.onopen = () => { retry = 0; };
    socket.onmessage = (m) => {
      let ev;
      try { ev = JSON.parse(m.data); } catch (e) { return; }
      try { handle(ev); } catch (e) { console.error(e); }
    };
    socket.onclose = () => {
      ready = false;
      if (retry < 0) return;
      conn.textContent = "reconnecting…";
      conn.className = "badge warn";
      retry = Math.min(retry + 1, 5);
      window.setTimeout(connect, 200 * 2 ** retry);
    };
  }

  function send(frame) {
    if (ready && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(frame));
    else outbox.push(frame);
  }

  function flushOutbox() {
    while (outbox.length && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(outbox.shift()));
  }

  function newId() {
    if (window.crypto && crypto.randomUUID) return crypto.randomUUID().replace(/-/g, "");
    return Date.now().toString(36) + Math.random().toString(36).slice(2);
  }

  function submit() {
    const text = input.value;
    if (!text.trim() || closed) return;
    const id = newId();
    contents.set(id, text);
    const frame = { type: "message", content: text, message_id: id };
    // Paused with nothing waiting: a new message is the obvious "go on", so it starts at once.
    if (state.paused && !state.running && state.pending.length === 0) frame.steer = true;
    if (state.running || state.pending.length) {
      state.pending.push({ message_id: id, content: text, sending: true });
      renderQueue();
    }
    send(frame);
    input.value = "";
    input.focus();
  }

  form.addEventListener("submit", (e) => { e.preventDefault(); submit(); });
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); submit(); }
  });
  stopButton.addEventListener("click", () => send({ type: "cancel" }));
  $("resume").addEventListener("click", () => {
    if (state.pending.length) send({ type: "steer", message_id: state.pending[0].message_id });
  });

  // ------------------------------------------------------------------ start

  loadHistory().then((rows) => {
    renderHistory(rows);
    renderQueue();
    if (closed) {
      conn.textContent = "closed";
      conn.className = "badge";
      return;
    }
    connect();
  });
  window.setInterval(() => { if (socket && socket.readyState === WebSocket.OPEN) socket.send('{"type":"ping"}'); }, 25000);
})();
