// The queue under the transcript and the run state (docs/protocol.md §3.4): what waits to be sent, with
// Steer (while a turn runs), Send now (while paused), Remove; Stop; the paused note, said once (the run
// state line stays empty while paused). The server is the truth: the `connected` snapshot and
// `message_status` events set it; messages typed while the socket is down show as "sending…". A queued
// message's event carries its text (typed in another tab, it shows here too), and `waiting_for` when
// the queue waits for one of the user's turn slots (docs/protocol.md §6.4 extension): said on the queue.
(function () {
  "use strict";
  const A = (window.agentsiteChat = window.agentsiteChat || {});
  const $ = (id) => document.getElementById(id);

  // host: {send(frame), contents: Map, closed(): bool, pendingFrame(id): bool}
  A.createQueue = function (host) {
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

    function renderQueue() {
      const paused = state.paused && !state.running;
      pendingList.replaceChildren();
      const waitingFor = !state.running && !paused && state.pending.length ? state.waiting_for : null;
      state.pending.forEach((item, index) => {
        const li = A.el("li", "pending-item");
        li.dataset.messageId = item.message_id;
        const label = A.el("span", "text", item.content || contents.get(item.message_id) || "(message)");
        label.id = "pending-text-" + item.message_id;
        label.title = label.textContent;
        li.appendChild(label);
        const actions = A.el("span", "pending-actions");
        if (item.sending) {
          actions.appendChild(A.el("span", "muted", "sending…"));
        } else {
          if (state.running) {
            const b = A.button(item.steer_requested ? "Steering…" : "Steer", () => send({ type: "steer", message_id: item.message_id }));
            b.setAttribute("aria-describedby", label.id);
            b.title = "Hand this message to the running turn now";
            b.disabled = !!item.steer_requested;
            actions.appendChild(b);
          } else if (paused) {
            const b = A.button("Send now", () => send({ type: "steer", message_id: item.message_id }), index === 0 ? "primary" : "");
            b.setAttribute("aria-describedby", label.id);
            actions.appendChild(b);
          }
          const r = A.button("Remove", () => send({ type: "remove", message_id: item.message_id }));
          r.setAttribute("aria-describedby", label.id);
          actions.appendChild(r);
        }
        li.appendChild(actions);
        if (index === 0 && waitingFor && !item.sending) {
          const why = A.el("span", "wait-reason", "Waiting for a free turn: " + waitingFor.message);
          why.id = "wait-reason";
          li.appendChild(why);
        }
        pendingList.appendChild(li);
      });
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
  };
})();
