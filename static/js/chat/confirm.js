// The approval dialog (docs/protocol.md §3.5): what a dangerous tool call or an external agent wants, shown
// in full so it can be judged — a write_file's content and its diff against the file (data.preview),
// a command highlighted as shell, every argument — with the same buttons in the same order for tools
// and external agents: Later (keep the question), the refusals, then the approvals (the default approval
// last, as the primary button). The safe answer has the focus. Keys: Esc refuses, Ctrl+Enter (⌘+Enter)
// approves; the dialog says so.
import { $, button, el } from "../dom.js";
import { highlight } from "../highlight.js";
import { argumentsText } from "./render.js";


function diffView(preview) {
  const box = el("div", "preview");
  const what = preview.exists ? "Changes to " : "New file ";
  box.appendChild(el("div", "label", what + preview.path + (preview.truncated ? " (shortened)" : "")));
  const pre = el("pre", "diff");
  pre.tabIndex = 0;
  pre.setAttribute("aria-label", "Diff of " + preview.path);
  const lines = (preview.diff || "").split("\n");
  if (lines.length && lines[lines.length - 1] === "") lines.pop();
  for (const line of lines) {
    let cls = "";
    if (line.startsWith("+++") || line.startsWith("---")) cls = "file";
    else if (line.startsWith("@@")) cls = "hunk";
    else if (line.startsWith("+")) cls = "add";
    else if (line.startsWith("-")) cls = "del";
    pre.appendChild(el("span", cls, line));
  }
  if (!lines.length) pre.appendChild(el("span", "hunk", preview.exists ? "(no change)" : "(an empty file)"));
  box.appendChild(pre);
  if (preview.old_binary) box.appendChild(el("p", "small-print", "The file there now is not text; it will be replaced."));
  if (preview.exists) {
    const whole = el("details");
    whole.appendChild(el("summary", "", "The whole new content"));
    const content = el("pre", "args", preview.new || "");
    content.tabIndex = 0;
    whole.appendChild(content);
    box.appendChild(whole);
  }
  return box;
}

function isAllow(option) {
  return String(option.kind || "").startsWith("allow");
}

// host: {reply(confirmationId, approved, optionId), returnFocus()}
export function createConfirmations(host) {
  const dialog = $("confirm");
  const reviewButton = $("review-approval");
  let pending = new Map(); // confirmation_id -> data
  let shown = null;
  let approveDefault = null;
  let refuseDefault = null;

  function open(data) {
    shown = data.confirmation_id;
    const acp = data.kind === "acp_permission";
    $("confirm-title").textContent = (acp ? "The external agent asks: " : "Allow ") + (data.tool || "this tool") + (acp ? "" : "?");
    $("confirm-reason").textContent = data.reason || "";
    const previewBox = $("confirm-preview");
    previewBox.replaceChildren();
    const preview = data.preview && data.preview.kind === "diff" ? data.preview : null;
    if (preview) previewBox.appendChild(diffView(preview));
    const hasCommand = typeof data.command === "string" && data.command !== "" && !preview;
    $("confirm-command-box").hidden = !hasCommand;
    const code = $("confirm-command").querySelector("code");
    code.removeAttribute("data-highlighted");
    code.className = data.tool === "shell" || acp ? "language-sh" : "";
    code.textContent = hasCommand ? data.command : "";
    if (hasCommand) highlight($("confirm-command-box"));
    $("confirm-args").textContent = argumentsText(data.arguments || {});
    $("confirm-args-box").open = !hasCommand && !preview;
    const actions = $("confirm-actions");
    actions.replaceChildren();
    const later = button("Later", () => dialog.close(), "later");
    later.title = "Keep the question open and decide later";
    actions.appendChild(later);
    let options = acp && Array.isArray(data.options) && data.options.length ? data.options.slice() : null;
    if (!options) {
      options = [
        { option_id: null, name: "Refuse", kind: "reject_once" },
        { option_id: null, name: "Approve", kind: "allow_once" },
      ];
    }
    const refusals = options.filter((o) => !isAllow(o));
    const approvals = options.filter(isAllow);
    // The one-time approval is the default: last, in the primary style.
    approvals.sort((a, b) => (a.kind === "allow_once") - (b.kind === "allow_once"));
    approveDefault = refuseDefault = null;
    for (const option of refusals.concat(approvals)) {
      const allow = isAllow(option);
      const b = button(option.name || option.option_id, () => answer(data.confirmation_id, allow, option.option_id));
      if (option.option_id) b.dataset.optionId = option.option_id;
      b.classList.add(allow ? "approve" : "refuse");
      actions.appendChild(b);
      if (!allow && (!refuseDefault || option.kind === "reject_once")) refuseDefault = b;
      if (allow) approveDefault = b;
    }
    if (approveDefault) approveDefault.classList.add("primary");
    if (!dialog.open) dialog.showModal();
    (refuseDefault || later).focus(); // the safe answer has the focus: Enter never approves by accident
    reviewButton.hidden = true;
  }

  function answer(confirmationId, approved, optionId) {
    host.reply(confirmationId, approved, optionId || null);
    $("confirm-actions").querySelectorAll("button").forEach((b) => { b.disabled = true; });
  }

  function close() {
    shown = null;
    if (dialog.open) dialog.close();
  }

  function showNext() {
    if (shown && !pending.has(shown)) close();
    const next = pending.values().next();
    reviewButton.hidden = next.done || dialog.open;
    if (next.done || dialog.open) return;
    open(next.value);
  }

  dialog.addEventListener("cancel", (e) => {
    // Esc: refuse (the safe answer), unless the answer is already on its way.
    e.preventDefault();
    if (refuseDefault && !refuseDefault.disabled) refuseDefault.click();
  });
  dialog.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey) && approveDefault && !approveDefault.disabled) {
      e.preventDefault();
      approveDefault.click();
    }
  });
  dialog.addEventListener("close", () => {
    if (dialog.open) return;
    shown = null;
    reviewButton.hidden = pending.size === 0;
    host.returnFocus();
    if (pending.size) host.announce("An approval is still waiting. Use Review approval to answer it.");
  });
  reviewButton.addEventListener("click", () => {
    const next = pending.values().next();
    if (!next.done) open(next.value);
  });

  return {
    replace(list) {
      pending = new Map((list || []).map((c) => [c.confirmation_id, c]));
      showNext();
    },
    add(data) {
      pending.set(data.confirmation_id, data);
      showNext();
    },
    resolved(id) {
      pending.delete(id);
      if (shown === id) close();
      showNext();
      reviewButton.hidden = pending.size === 0 || dialog.open;
    },
  };
}
