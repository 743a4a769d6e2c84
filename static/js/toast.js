// A short note at the bottom of the page, with an optional action (e.g. Undo); one at a time.
let timer = null;

export function toast(text, action, seconds) {
  const old = document.getElementById("toast");
  if (old) old.remove();
  window.clearTimeout(timer);
  const box = document.createElement("div");
  box.id = "toast";
  box.className = "toast";
  box.setAttribute("role", "status");
  const label = document.createElement("span");
  label.textContent = text;
  box.appendChild(label);
  if (action) {
    const b = document.createElement("button");
    b.type = "button";
    b.className = "small";
    b.textContent = action.label;
    b.addEventListener("click", () => { box.remove(); action.run(); });
    box.appendChild(b);
  }
  document.body.appendChild(box);
  timer = window.setTimeout(() => box.remove(), (seconds || 5) * 1000);
  return box;
}
