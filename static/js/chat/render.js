// The transcript: how stored history and live events are drawn (one set of drawing functions for both).
//
// The transcript is a flat list: user bubbles and assistant blocks. A turn's output goes into the last
// block when that block belongs to the turn, else into a new one (a steered message splits a turn).
// Inside a block the same rule holds for parts: text streams into the last part when it is text.
// A finished turn's last block carries its status (`data-status`, a badge when it did not complete),
// its usage and its actions. History rows (GET …/messages, docs/protocol.md extensions "Messages") carry
// each model step's text, thinking, tool calls and status, so a reload draws what was seen live.
// Exports createRenderer(transcript, hooks), argumentsText, derivedId, FINISHED.
import { button, el } from "../dom.js";
import { highlight } from "../highlight.js";

export const FINISHED = new Set(["completed", "cancelled", "error", "interrupted", "closed"]);

export function argumentsText(args) {
  if (typeof args === "string") {
    try { return JSON.stringify(JSON.parse(args), null, 2); } catch (e) { return args; }
  }
  return JSON.stringify(args, null, 2);
}

// Messages the portal sends as an edit or a second try of an earlier one carry that one's id in theirs
// (`edit-<original id>-<8 chars>`, `again-<original id>-<8 chars>`), so a reload shows the relation too.
const DERIVED = /^(edit|again)-(?:(.+)-)?([0-9a-z]{8})$/;
export function derivedId(kind, original) {
  const tail = Math.random().toString(36).slice(2, 10).padEnd(8, "0");
  const id = kind + "-" + original + "-" + tail;
  return id.length <= 128 ? id : kind + "-" + tail;
}

function usageText(usage) {
  if (!usage) return "";
  const parts = [];
  if (usage.prompt_tokens !== undefined) parts.push(usage.prompt_tokens + " in");
  if (usage.completion_tokens !== undefined) parts.push(usage.completion_tokens + " out");
  const total = usage.total_tokens !== undefined ? usage.total_tokens : null;
  return (total !== null ? total + " tokens" : "tokens") + (parts.length ? " (" + parts.join(", ") + ")" : "");
}

function addUsage(total, step) {
  if (!step) return total;
  const out = Object.assign({}, total || {});
  for (const k of Object.keys(step)) if (typeof step[k] === "number") out[k] = (out[k] || 0) + step[k];
  return out;
}

const STATUS_WORDS = {
  cancelled: "cancelled",
  error: "failed",
  interrupted: "interrupted",
  closed: "closed",
};

// hooks: {open(): bool, copy(text), edit(id, text), again(turnId), failure(turnId): string|null}
export function createRenderer(transcript, hooks) {
  const turns = new Map(); // message_id -> {usage, tools: Map(call_id -> details)}
  const raw = new WeakMap(); // text part -> the Markdown it shows (for Copy)

  function turn(id) {
    let t = turns.get(id);
    if (!t) {
      t = { usage: null, tools: new Map() };
      turns.set(id, t);
    }
    return t;
  }

  function reset() {
    transcript.replaceChildren();
    turns.clear();
  }

  function userBubble(id, text, steered) {
    const existing = document.getElementById("u-" + id);
    if (existing) {
      if (text && existing.dataset.placeholder) {
        existing.querySelector(".body").textContent = text;
        delete existing.dataset.placeholder;
      }
      return existing;
    }
    const li = el("li", "msg user");
    li.id = "u-" + id;
    li.dataset.messageId = id;
    const who = el("div", "who", "You");
    if (steered) who.appendChild(el("span", "badge", "steered"));
    const derived = DERIVED.exec(id);
    if (derived) {
      who.appendChild(el("span", "badge", derived[1] === "edit" ? "edited" : "asked again"));
      if (derived[2] && document.getElementById("u-" + derived[2])) {
        const link = el("a", "", derived[1] === "edit" ? "the original" : "the first time");
        link.href = "#u-" + derived[2];
        who.appendChild(link);
      }
    }
    li.appendChild(who);
    li.appendChild(el("div", "body", text || "…"));
    if (!text) li.dataset.placeholder = "1";
    transcript.appendChild(li);
    return li;
  }

  function newBlock(id) {
    const li = el("li", "msg assistant");
    li.dataset.turn = id;
    li.appendChild(el("div", "who", "Agent"));
    li.appendChild(el("div", "parts"));
    li.appendChild(el("div", "meta"));
    return li;
  }

  function block(id) {
    const last = transcript.lastElementChild;
    if (last && last.classList.contains("assistant") && last.dataset.turn === id) return last;
    return transcript.appendChild(newBlock(id));
  }

  function lastPart(li, cls) {
    const last = li.querySelector(".parts").lastElementChild;
    return last && last.classList.contains(cls) ? last : null;
  }

  function addPart(li, node) {
    return li.querySelector(".parts").appendChild(node);
  }

  function appendText(id, chunk) {
    const li = block(id);
    let part = lastPart(li, "text");
    if (!part || part.dataset.final) part = addPart(li, el("div", "text streaming"));
    part.textContent += chunk;
    raw.set(part, part.textContent);
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
      raw.set(part, part.textContent);
      part = null;
    }
    if (!part) part = addPart(li, el("div", "text"));
    part.classList.remove("streaming");
    part.classList.add("markdown");
    part.dataset.final = "1";
    if (html !== undefined && html !== null) part.innerHTML = html; // sanitised on the server (chat/markdown.py)
    else part.textContent = text || "";
    raw.set(part, text || part.textContent);
    highlight(part);
  }

  function appendThinking(id, chunk) {
    const li = block(id);
    let part = lastPart(li, "thinking");
    if (!part) {
      part = addPart(li, el("details", "thinking"));
      part.appendChild(el("summary", "", "Thinking"));
      const pre = part.appendChild(el("pre"));
      pre.tabIndex = 0;
    }
    part.querySelector("pre").textContent += chunk;
  }

  // A tool's name may break after its underscores and nowhere else (mcp__server__read_file).
  function breakable(node, name) {
    String(name).split(/(?<=_)/).forEach((part, i) => {
      if (i) node.appendChild(document.createElement("wbr"));
      node.appendChild(document.createTextNode(part));
    });
  }

  function toolBlock(id, callId, name, args) {
    const t = turn(id);
    let d = callId ? t.tools.get(callId) : null;
    if (d) return d;
    d = addPart(block(id), el("details", "tool"));
    if (callId) d.dataset.callId = callId;
    const summary = el("summary");
    const label = summary.appendChild(el("span", "tool-name identifier", "Tool: "));
    breakable(label, name);
    summary.append(" ", el("span", "badge tool-status", "running"));
    d.appendChild(summary);
    d.appendChild(el("div", "label", "Arguments"));
    const pre = d.appendChild(el("pre", "args", argumentsText(args)));
    pre.tabIndex = 0;
    if (callId) t.tools.set(callId, d);
    return d;
  }

  function toolResult(id, callId, name, output, isError) {
    const d = toolBlock(id, callId, name, {});
    let pre = d.querySelector("pre.output");
    if (!pre) {
      d.appendChild(el("div", "label", "Result"));
      pre = d.appendChild(el("pre", "output"));
      pre.tabIndex = 0;
    }
    pre.textContent = output;
    d.classList.toggle("error", !!isError);
    d.querySelector(".tool-status").textContent = isError ? "error" : "done";
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
    item.appendChild(el("span", "t", [u.title, u.text].filter(Boolean).join(": ")));
    if (u.status) item.append(" ", el("span", "badge", u.status));
    log.appendChild(item);
  }

  function blocksOf(id) {
    return transcript.querySelectorAll('li.assistant[data-turn="' + CSS.escape(id) + '"]');
  }

  // A turn ended: its last block (or a stub right after its message, when it wrote nothing) shows how.
  function finishTurn(id, status, usage) {
    const blocks = blocksOf(id);
    blocks.forEach((b) => b.querySelectorAll(".text.streaming").forEach((p) => p.classList.remove("streaming")));
    let li = blocks.length ? blocks[blocks.length - 1] : null;
    if (!li) {
      if (status === "completed") return;
      li = newBlock(id);
      const bubble = document.getElementById("u-" + id);
      if (bubble) bubble.after(li);
      else transcript.appendChild(li);
    }
    li.querySelectorAll(".tool-status").forEach((s) => { if (s.textContent === "running") s.textContent = "not finished"; });
    li.dataset.status = status;
    const who = li.querySelector(".who");
    who.querySelectorAll(".badge").forEach((b) => b.remove());
    if (STATUS_WORDS[status]) who.append(" ", el("span", "badge status-" + status, STATUS_WORDS[status]));
    li.querySelector(".meta").textContent = usageText(usage);
    li.classList.toggle("failed", status === "error" || status === "interrupted");
    li.classList.toggle("cancelled", status === "cancelled");
    const old = li.querySelector(".failure");
    if (old) old.remove();
    if (status === "error" || status === "interrupted") {
      const detail = hooks.failure(id);
      const text = status === "interrupted"
        ? "The server stopped while this answer was being written."
        : "The model could not answer" + (detail ? ": " + detail : ".");
      const note = el("div", "failure", text);
      li.insertBefore(note, li.querySelector(".meta"));
    }
  }

  function turnText(id) {
    const texts = [];
    blocksOf(id).forEach((b) => b.querySelectorAll(".parts > .text").forEach((p) => texts.push(raw.get(p) || p.textContent)));
    return texts.join("\n\n");
  }

  // Actions follow from what is drawn: Copy and Edit on your messages; Copy on each finished turn;
  // on the last turn of the chat, Regenerate (or Retry when it failed).
  function decorate() {
    transcript.querySelectorAll(".msg-actions").forEach((n) => n.remove());
    const open = hooks.open();
    transcript.querySelectorAll("li.msg.user:not([data-placeholder])").forEach((li) => {
      const bar = el("div", "msg-actions");
      const text = li.querySelector(".body").textContent;
      bar.appendChild(button("Copy", () => hooks.copy(text)));
      if (open) bar.appendChild(button("Edit", () => startEdit(li, text)));
      bar.querySelectorAll("button").forEach((b) => b.setAttribute("aria-label", b.textContent + " your message"));
      li.appendChild(bar);
    });
    const lastBlock = transcript.querySelector("li.assistant:last-of-type");
    const finished = transcript.querySelectorAll("li.assistant[data-status]");
    finished.forEach((li) => {
      const id = li.dataset.turn;
      const bar = el("div", "msg-actions");
      const text = turnText(id);
      if (text) bar.appendChild(button("Copy", () => hooks.copy(text)));
      const isLast = li === lastBlock && li === transcript.lastElementChild;
      if (open && isLast && document.getElementById("u-" + id)) {
        const failed = li.dataset.status === "error" || li.dataset.status === "interrupted";
        bar.appendChild(button(failed ? "Retry" : "Regenerate", () => hooks.again(id), failed ? "primary" : ""));
      }
      bar.querySelectorAll("button").forEach((b) => b.setAttribute("aria-label", b.textContent + " the answer"));
      if (bar.childElementCount) li.appendChild(bar);
    });
  }

  function startEdit(li, text) {
    if (li.querySelector(".edit-form")) return;
    const form = el("form", "edit-form");
    const label = el("label", "visually-hidden", "Your message, edited");
    const box = el("textarea");
    box.id = "edit-" + li.dataset.messageId;
    label.htmlFor = box.id;
    box.value = text;
    const actions = el("div", "actions");
    const cancel = button("Cancel", () => { form.remove(); li.querySelector(".body").hidden = false; });
    const send = el("button", "primary small", "Send edited");
    send.type = "submit";
    cancel.classList.add("small");
    actions.append(cancel, send);
    form.append(label, box, actions);
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      if (!box.value.trim()) return;
      form.remove();
      li.querySelector(".body").hidden = false;
      hooks.edit(li.dataset.messageId, box.value);
    });
    box.addEventListener("keydown", (e) => { if (e.key === "Escape") cancel.click(); });
    li.querySelector(".body").hidden = true;
    li.insertBefore(form, li.querySelector(".msg-actions"));
    box.focus();
  }

  // A steered message keeps status `steered` only while its turn runs; then it takes the turn's outcome.
  // It is known by what follows it: rows its turn wrote after it carry an earlier message's reply_to.
  function steeredIn(rows) {
    const at = new Map();
    rows.forEach((m, i) => { if (m.role === "user" && !at.has(m.message_id)) at.set(m.message_id, i); });
    const out = new Set();
    rows.forEach((m, i) => {
      if (m.role !== "user") return;
      if (m.status === "steered") return out.add(m.message_id);
      for (let j = i + 1; j < rows.length && rows[j].role !== "user"; j++) {
        const owner = rows[j].reply_to;
        if (!owner) continue;
        if (owner !== m.message_id && at.has(owner) && at.get(owner) < i) out.add(m.message_id);
        break;
      }
    });
    return out;
  }

  // Stored history → the transcript. Returns the turns it saw finished (their replayed events are
  // skipped: history already shows them, except an external agent's progress, which is not stored).
  function renderHistory(rows) {
    reset();
    const finished = new Set();
    const userStatus = new Map();
    const steered = steeredIn(rows);
    let current = null;
    for (const m of rows) {
      if (m.role === "user") {
        userBubble(m.message_id, m.content, steered.has(m.message_id));
        hooks.remember(m.message_id, m.content);
        if (m.error) hooks.failed(m.message_id, m.error);
        if (!steered.has(m.message_id)) {
          current = m.message_id;
          userStatus.set(current, m.status);
          if (FINISHED.has(m.status)) finished.add(current);
        }
      } else if (m.role === "assistant") {
        const id = m.reply_to || current || m.message_id;
        if (m.reasoning) appendThinking(id, m.reasoning);
        if (m.content) {
          if (m.status === "streaming") appendText(id, m.content);
          else setHtml(id, m.html, m.content);
        }
        for (const call of m.tool_calls || []) {
          const fn = call.function || {};
          toolBlock(id, call.id, fn.name || "tool", fn.arguments || "");
        }
        if (m.usage) turn(id).usage = addUsage(turn(id).usage, m.usage);
      } else if (m.role === "tool") {
        toolResult(m.reply_to || current || m.message_id, m.tool_call_id, "tool", m.content, m.status === "error");
      } else if (m.role === "system" && m.content) {
        transcript.appendChild(el("li", "msg system", m.content));
      }
    }
    for (const [id, status] of userStatus) {
      if (FINISHED.has(status)) finishTurn(id, status, turns.get(id) ? turns.get(id).usage : null);
    }
    return finished;
  }

  return {
    reset, turn, turns, userBubble, block, lastPart, appendText, setHtml, appendThinking, toolBlock,
    toolResult, delegateUpdate, finishTurn, decorate, renderHistory, blocksOf,
  };
}
