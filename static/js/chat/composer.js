// What the composer keeps, so that nothing typed is lost (main.js sends; this holds the text):
// - the limits the server applies, from the page's data- attributes and read when a message is sent:
//   content (data-max-content, docs/protocol.md §3.2) and the frame (data-max-frame,
//   AGENTSITE_WS_MAX_FRAME_BYTES; a larger frame closes the socket with 1009). A message over them is
//   never sent; the reason is said and the text stays in the composer;
// - the draft: what is typed is kept in localStorage per chat (a new chat's under its agent) until the
//   server has it, and put back when the page loads (after a reload or a sign-in);
// - restore: a text that did not reach the server goes back into the composer.

// host: {root, input, sessionId(): string, closed(): bool, frame(text): the frame that would carry it}
export function createComposer(host) {
  const root = host.root;
  const input = host.input;
  const limits = {
    get content() { return Number(root.dataset.maxContent) || 100000; },
    get frame() { return Number(root.dataset.maxFrame) || 1048576; },
  };
  const key = () => "agentsite:draft:" + (host.sessionId() || "new:" + root.dataset.agent);
  const n = (x) => x.toLocaleString("en");
  let timer = null;

  function frameBytes(frame) {
    return new TextEncoder().encode(JSON.stringify(frame)).length;
  }

  // Why the server would refuse this text for its size, or null.
  function sizeProblem(text) {
    const pairs = text.match(/[\uD800-\uDBFF][\uDC00-\uDFFF]/g); // characters as the server counts them
    const chars = text.length - (pairs ? pairs.length : 0);
    if (chars > limits.content) {
      return "This message is " + n(chars) + " characters; a message may hold at most " + n(limits.content) + ". It was not sent and is still in the composer: shorten it or split it.";
    }
    const bytes = frameBytes(host.frame(text));
    if (bytes > limits.frame) {
      return "This message takes " + n(bytes) + " bytes to send; the server takes at most " + n(limits.frame) + ". It was not sent and is still in the composer: shorten it or split it.";
    }
    return null;
  }

  function save() {
    window.clearTimeout(timer);
    try {
      if (input.value.trim()) localStorage.setItem(key(), input.value);
      else localStorage.removeItem(key());
    } catch (e) { /* storage off or full: the composer still holds it */ }
  }

  // Before what is typed there now, once.
  function restore(text) {
    if (!text || input.value.includes(text)) return;
    input.value = input.value.trim() ? text + "\n\n" + input.value : text;
    save();
  }

  // A new chat got its session (`change` sets it): its draft becomes the chat's.
  function carry(change) {
    let kept = null;
    try {
      kept = localStorage.getItem(key());
      localStorage.removeItem(key());
    } catch (e) { /* storage off */ }
    change();
    try { if (kept) localStorage.setItem(key(), kept); } catch (e) { /* storage off */ }
  }

  // Refused before sending: said, kept, and marked until the text changes.
  function refuse(reason, say) {
    save();
    input.setAttribute("aria-invalid", "true");
    input.focus();
    say(reason);
  }

  function signInUrl() {
    return (root.dataset.loginUrl || "/login/") + "?next=" + encodeURIComponent(location.pathname + location.search);
  }

  input.addEventListener("input", () => {
    input.removeAttribute("aria-invalid");
    window.clearTimeout(timer);
    timer = window.setTimeout(save, 300);
  });
  window.addEventListener("pagehide", save); // a link followed before the timer fires
  try {
    const kept = localStorage.getItem(key());
    if (kept && !input.value && !host.closed()) input.value = kept;
  } catch (e) { /* storage off */ }

  return { limits, frameBytes, sizeProblem, save, restore, carry, refuse, signInUrl };
}
