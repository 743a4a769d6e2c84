// The colour theme, before the page is drawn (loaded in <head>, not deferred, so there is no flash):
// the reader's choice from localStorage ("light" or "dark"), else the system's (prefers-color-scheme).
// The toggle in the top bar (portal.js) changes and remembers it.
// The one classic script (no type="module"): a module is deferred, and this must run before the first
// paint, or a dark page would flash light. It shares nothing: it only sets <html data-theme>.
(function () {
  "use strict";
  let chosen = null;
  try { chosen = localStorage.getItem("agentsite:theme"); } catch (e) { /* storage off */ }
  const dark = chosen ? chosen === "dark" : window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
  document.documentElement.dataset.theme = dark ? "dark" : "light";
})();
