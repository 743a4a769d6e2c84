// The chat view's mutable state, in one object: main.js creates it (createChatState) and is the only
// module that changes it; the other chat modules get what they need of it through their host functions
// (e.g. queue.js's `closed()`, files.js's `sessionId()`), never the object itself. One exception, said
// where it is handed over: queue.js is given the `contents` map and adds the texts the server sends.
export function createChatState(root) {
  return {
    // The chat
    sessionId: root.dataset.sessionId, // "" for a draft chat until its first message creates it
    closed: root.dataset.status === "closed",
    titleKnown: document.getElementById("chat-title").dataset.untitled !== "1",
    signedOut: false, // the browser session ended: nothing is sent until the person signs in again

    // The socket and its reconnects
    socket: null,
    ready: false, // the socket is open and `connected` arrived
    retry: 0, // reconnects in a row (the back-off); -1: never reconnect
    retryIn: 0, // when set: the next reconnect waits this long (ms) instead of the backoff
    stableTimer: null, // a socket open this long resets the reconnect back-off
    oversizedCloses: 0, // 1009 closes in a row that no frame of ours explains
    outbox: [], // frames typed while the socket was down
    unacked: new Map(), // message frames sent and not yet acknowledged: re-sent (same id) when refused for now

    // Events and the transcript
    lastSeq: null, // highest seq applied
    liveFrom: Infinity, // events with seq > liveFrom change queue state (set by `connected`)
    finishedInHistory: new Set(), // turns whose whole output came from stored history
    held: null, // events that arrive while a resync redraws from history
    epoch: 0, // bumped by every event that draws: a settle started before it is dropped
    settleTimer: null,
    refetchTimer: null,
    contents: new Map(), // message_id -> text the user typed (bubbles, the queue, regenerate)
    failures: new Map(), // turn id -> the error message its `result` carried (history rows keep it too)
    delegates: new Map(), // call_id -> the `delegate_update` events of that call (not stored)
  };
}
