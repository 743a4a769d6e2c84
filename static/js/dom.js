// Small DOM helpers shared by the portal's modules (no framework; lit-html draws the lists, see
// static/vendor/README.md).

export const $ = (id) => document.getElementById(id);

// An element with a class and a text (never markup).
export function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

export function button(label, onClick, cls) {
  const b = el("button", cls || "", label);
  b.type = "button";
  b.addEventListener("click", onClick);
  return b;
}
