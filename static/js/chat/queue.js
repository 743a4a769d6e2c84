// The queue under the transcript and the run state (docs/protocol.md §3.4): what waits to be sent, with
// Steer (while a turn runs), Send now (while paused), Remove; Stop; the paused note, said once (the run
// state line stays empty while paused). The server is the truth: the `connected` snapshot and
// `message_status` events set it; messages typed while the socket is down show as "sending…". A queued
// message's event carries its text (typed in another tab, it shows here too), and `waiting_for` when
// the queue waits for one of the user's turn slots (docs/protocol.md §6.4 extension): said on the queue.
import { html, nothing, render } from "../../vendor/lit-html/lit-html.js";
import { $ } from "../dom.js";

// Exports createQueue(host); the list is drawn with lit-html (static/vendor/README.md).

// host: {send(frame), contents: Map, closed(): bool, pendingFrame(id): bool}
export function createQueue(host) {
  const root = $("chat");
  const transcript = $("transcript");
  const runState = $("run-state");
  const stopButton = $("cancel");
  const queueBox = $("queue");
  const pendingList = $("pending");
  const pausedNote = $("paused");
  const composerHint = $("composer-hint");
  const contents = host.contents;
  const send = host.send;
  let state = { running: false, paused: false, active_message_id: null, pending: [], waiting_for: null };

  // One queued message: its text, then what can be done with it now; the first one says why the queue
  // waits, when it waits for a turn slot.
  function itemView(item, index, paused, waitingFor) {
    const id = item.message_id;
    const text = item.content || contents.get(id) || "(message)";
    const labelId = "pending-text-" + id;
    const steer = () => send({ type: "steer", message_id: id });
    let actions;
    if (item.sending) actions = html`<span class="muted">sending…</span>`;
    else {
      actions = html`${state.running
        ? html`<button type="button" aria-describedby=${labelId} title="Hand this message to the running turn now"
            ?disabled=${!!item.steer_requested} @click=${steer}>${item.steer_requested ? "Steering…" : "Steer"}</button>`
        : paused
          ? html`<button type="button" class=${index === 0 ? "primary" : ""} aria-describedby=${labelId} @click=${steer}>Send now</button>`
          : nothing}<button type="button" aria-describedby=${labelId} @click=${() => send({ type: "remove", message_id: id })}>Remove</button>`;
    }
    const why = index === 0 && waitingFor && !item.sending
      ? html`<span class="wait-reason" id="wait-reason">Waiting for a free turn: ${waitingFor.message}</span>`
      : nothing;
    return html`<li class="pending-item" data-message-id=${id}><span class="text" id=${labelId} title=${text}>${text}</span><span class="pending-actions">${actions}</span>${why}</li>`;
  }

  function renderQueue() {
    const paused = state.paused && !state.running;
    const waitingFor = !state.running && !paused && state.pending.length ? state.waiting_for : null;
    render(state.pending.map((item, index) => itemView(item, index, paused, waitingFor)), pendingList);
    const waiting = state.pending.length;
    queueBox.hidden = waiting === 0 && !paused;
    $("queue-title").hidden = waiting === 0;
    $("queue-count").textContent = waiting ? "(" + waiting + ")" : "";
    pausedNote.hidden = !paused;
    $("resume").hidden = waiting === 0;
    $("paused-empty").hidden = waiting !== 0;
    stopButton.disabled = !state.running;
    transcript.setAttribute("aria-busy", state.running ? "true" : "false");
    root.classList.toggle("running", state.running);
    runState.textContent = state.running ? "Agent is working…" : ""; // "paused" is said by the note only
    if (host.closed()) composerHint.textContent = "This chat is closed.";
    else if (state.running) composerHint.textContent = "New messages wait in the queue; Steer hands one to the running turn.";
    else if (paused && waiting) composerHint.textContent = "Paused: new messages join the queue until you resume.";
    else if (paused) composerHint.textContent = "Paused: your next message starts a new turn.";
    else composerHint.textContent = "Enter sends, Shift+Enter makes a new line.";
  }

  function applySnapshot(snapshot) {
    if (!snapshot) return;
    const optimistic = state.pending.filter((p) => p.sending && host.pendingFrame(p.message_id));
    state = {
      running: !!snapshot.running,
      paused: !!snapshot.paused,
      active_message_id: snapshot.active_message_id || null,
      pending: (snapshot.pending || []).map((p) => Object.assign({}, p)),
      waiting_for: snapshot.waiting_for || null,
    };
    for (const p of state.pending) contents.set(p.message_id, p.content);
    state.pending.push(...optimistic);
    renderQueue();
  }

  function dropPending(id) {
    state.pending = state.pending.filter((p) => p.message_id !== id);
  }

  function applyStatus(ev) {
    const id = ev.message_id;
    if (typeof ev.content === "string" && !contents.get(id)) contents.set(id, ev.content);
    if (ev.status === "queued") state.waiting_for = ev.waiting_for || null;
    if (ev.waiting_for) state.paused = false; // only an unpaused queue waits for a turn slot
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
        state.waiting_for = null;
      }
    }
    renderQueue();
  }

  return {
    get state() { return state; },
    render: renderQueue,
    snapshot: applySnapshot,
    status: applyStatus,
    // A message typed now: shown as "sending…" until the server queues it.
    sending(id, text) {
      state.pending.push({ message_id: id, content: text, sending: true });
      renderQueue();
    },
    refused(id) {
      const p = state.pending.find((x) => x.message_id === id && x.sending);
      if (p) { dropPending(id); renderQueue(); }
    },
    ended(status) {
      state.running = false;
      state.active_message_id = null;
      if (status !== "completed") state.paused = true;
      renderQueue();
    },
  };
}
