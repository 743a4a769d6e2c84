// The workspace panel: the files of this chat's workspace (docs/protocol.md extensions "Workspace files").
// A tree that opens folders as you go, a preview (text and code highlighted, images, Markdown rendered and
// sanitised by the server), download, upload (button or drop), delete. It refreshes itself when a tool
// may have changed the workspace (main.js calls refreshSoon on tool results).
import { api, csrfToken } from "../api.js";
import { $, button, el } from "../dom.js";
import { highlight } from "../highlight.js";


function sizeText(n) {
  if (n === null || n === undefined) return "";
  if (n < 1024) return n + " B";
  if (n < 1024 * 1024) return (n / 1024).toFixed(1) + " KB";
  return (n / 1024 / 1024).toFixed(1) + " MB";
}

function encodePath(path) {
  return path.split("/").map(encodeURIComponent).join("/");
}

// host: {sessionId(): string, layout: element, toggle: button}
export function createFiles(host) {
  const panel = $("files");
  const tree = $("file-tree");
  const previewBox = $("file-preview");
  const status = $("files-status");
  const upload = $("file-upload");
  const expanded = new Set(["."]);
  let selected = null;
  let timer = null;

  const base = () => "/api/v1/chat/sessions/" + encodeURIComponent(host.sessionId()) + "/files";
  const fileUrl = (path) => base() + "/" + encodePath(path);

  async function listing(path) {
    const out = [];
    let cursor = null;
    do {
      const query = "?path=" + encodeURIComponent(path) + "&limit=1000" + (cursor ? "&cursor=" + cursor : "");
      const r = await api("GET", base() + query);
      if (!r.ok) throw new Error((r.data && r.data.error && r.data.error.message) || "HTTP " + r.status);
      out.push(...r.data.results);
      cursor = r.data.next;
    } while (cursor);
    return out;
  }

  function entryNode(entry, depth) {
    const li = el("li");
    li.dataset.path = entry.path;
    li.dataset.depth = String(depth);
    const row = el("div", "entry");
    const isDir = entry.type === "directory";
    const open = expanded.has(entry.path);
    const name = button((isDir ? (open ? "▾ " : "▸ ") : "") + entry.name + (isDir ? "/" : ""), () => {
      if (isDir) toggleFolder(entry.path);
      else showFile(entry);
    }, "name");
    if (isDir) name.setAttribute("aria-expanded", String(open));
    if (selected === entry.path) name.setAttribute("aria-current", "true");
    row.appendChild(name);
    if (entry.type === "file") row.appendChild(el("span", "size", sizeText(entry.size)));
    const tools = el("span", "tools");
    if (entry.type === "file") {
      const link = el("a", "button small", "Download");
      link.href = fileUrl(entry.path) + "?download=1";
      link.setAttribute("aria-label", "Download " + entry.path);
      tools.appendChild(link);
    }
    const del = button("Delete", () => remove(entry), "small danger");
    del.setAttribute("aria-label", "Delete " + entry.path);
    tools.appendChild(del);
    row.appendChild(tools);
    li.appendChild(row);
    return li;
  }

  async function drawFolder(path, into, depth) {
    const entries = await listing(path);
    const list = path === "." ? into : el("ul");
    list.replaceChildren();
    if (!entries.length && path === ".") list.appendChild(el("li", "muted", "The workspace is empty."));
    for (const entry of entries) {
      const li = list.appendChild(entryNode(entry, depth));
      if (entry.type === "directory" && expanded.has(entry.path)) await drawFolder(entry.path, li, depth + 1);
    }
    if (path !== ".") into.appendChild(list);
  }

  const LIST_FAILED = "Could not list the files: ";

  async function refresh() {
    if (panel.hidden || !host.sessionId()) return;
    try {
      await drawFolder(".", tree, 1);
      // Only a listing's own failure goes: what an upload or delete said meanwhile stays.
      if (status.textContent.startsWith(LIST_FAILED)) status.textContent = "";
      tree.dataset.loaded = String(Date.now());
    } catch (err) {
      status.textContent = LIST_FAILED + err.message;
    }
  }

  function toggleFolder(path) {
    if (expanded.has(path)) expanded.delete(path);
    else expanded.add(path);
    refresh();
  }

  async function showFile(entry) {
    selected = entry.path;
    tree.querySelectorAll("button.name[aria-current]").forEach((b) => b.removeAttribute("aria-current"));
    const current = tree.querySelector('li[data-path="' + CSS.escape(entry.path) + '"] button.name');
    if (current) current.setAttribute("aria-current", "true");
    const r = await api("GET", fileUrl(entry.path) + "?preview=1");
    previewBox.replaceChildren();
    const head = el("div", "preview-head");
    head.appendChild(el("strong", "", entry.path));
    const link = el("a", "button small", "Download");
    link.href = fileUrl(entry.path) + "?download=1";
    head.appendChild(link);
    previewBox.appendChild(head);
    if (!r.ok) {
      previewBox.appendChild(el("p", "error", (r.data && r.data.error && r.data.error.message) || "Could not read it."));
      return;
    }
    const p = r.data;
    if (p.kind === "image") {
      const img = el("img");
      img.src = fileUrl(entry.path);
      img.alt = "Preview of " + entry.name;
      previewBox.appendChild(img);
    } else if (p.kind === "markdown") {
      const body = el("div", "markdown");
      body.innerHTML = p.html; // sanitised on the server (chat/markdown.py)
      highlight(body);
      previewBox.appendChild(body);
    } else if (p.kind === "text") {
      const pre = el("pre");
      pre.tabIndex = 0;
      pre.setAttribute("aria-label", "Content of " + entry.path);
      const code = el("code", p.language ? "language-" + p.language : "", p.content);
      pre.appendChild(code);
      previewBox.appendChild(pre);
      highlight(previewBox);
    } else {
      previewBox.appendChild(el("p", "muted", "A binary file (" + sizeText(entry.size) + "): download it to open it."));
    }
    if (p.truncated) previewBox.appendChild(el("p", "small-print", "Only the beginning is shown; download the file for all of it."));
  }

  async function remove(entry) {
    if (!window.confirm("Delete " + entry.path + (entry.type === "directory" ? " and everything in it" : "") + "?")) return;
    const r = await api("DELETE", fileUrl(entry.path));
    status.textContent = r.ok ? "Deleted " + entry.path + "." : "Could not delete it: " + ((r.data && r.data.error && r.data.error.message) || r.status);
    if (selected && (selected === entry.path || selected.startsWith(entry.path + "/"))) {
      selected = null;
      previewBox.replaceChildren();
    }
    refresh();
  }

  async function send(files) {
    const folder = selected && selected.includes("/") ? selected.slice(0, selected.lastIndexOf("/")) : "";
    const limit = Number($("files-drop").dataset.maxUpload) || Infinity;
    for (const file of files) {
      const path = (folder ? folder + "/" : "") + file.name;
      if (file.size > limit) {
        status.textContent = file.name + " is larger than the limit of " + sizeText(limit) + "; it was not uploaded.";
        continue;
      }
      status.textContent = "Uploading " + path + "…";
      let response;
      try {
        response = await fetch(fileUrl(path), {
          method: "PUT",
          credentials: "same-origin",
          headers: { "X-CSRFToken": csrfToken(), "Content-Type": "application/octet-stream" },
          body: file,
        });
      } catch (e) {
        status.textContent = "The upload of " + path + " failed.";
        return;
      }
      if (!response.ok) {
        let message = "HTTP " + response.status;
        try { message = (await response.json()).error.message; } catch (e) { /* not JSON */ }
        status.textContent = "Could not upload " + path + ": " + message;
        return;
      }
      status.textContent = "Uploaded " + path + ".";
    }
    refresh();
  }

  function setOpen(open) {
    panel.hidden = !open;
    host.layout.classList.toggle("files-open", open);
    host.toggle.setAttribute("aria-expanded", String(open));
    try { localStorage.setItem("agentsite:files-open", open ? "1" : ""); } catch (e) { /* storage off */ }
    if (open) refresh();
  }

  host.toggle.addEventListener("click", () => setOpen(panel.hidden));
  $("files-close").addEventListener("click", () => { setOpen(false); host.toggle.focus(); });
  $("files-refresh").addEventListener("click", refresh);
  $("files-upload").addEventListener("click", () => upload.click());
  upload.addEventListener("change", () => { send(Array.from(upload.files)); upload.value = ""; });
  const drop = $("files-drop");
  panel.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("dragging"); });
  panel.addEventListener("dragleave", () => drop.classList.remove("dragging"));
  panel.addEventListener("drop", (e) => {
    e.preventDefault();
    drop.classList.remove("dragging");
    if (e.dataTransfer && e.dataTransfer.files.length) send(Array.from(e.dataTransfer.files));
  });
  panel.addEventListener("keydown", (e) => { if (e.key === "Escape" && window.matchMedia("(max-width: 900px)").matches) setOpen(false); });

  return {
    refreshSoon() {
      window.clearTimeout(timer);
      timer = window.setTimeout(refresh, 300);
    },
    restore() {
      let open = false;
      try { open = localStorage.getItem("agentsite:files-open") === "1"; } catch (e) { /* storage off */ }
      if (open && host.sessionId() && !window.matchMedia("(max-width: 900px)").matches) setOpen(true);
    },
    enable() { host.toggle.disabled = false; },
  };
}
