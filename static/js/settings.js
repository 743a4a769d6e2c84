// Page-specific bits of the settings, jobs and inbox pages (the generic API forms are in portal.js, which
// builds the key and job forms' bodies with the functions given here to setBodyBuilder).
import { api } from "./api.js";
import { $ } from "./dom.js";
import { refreshInbox, setBodyBuilder } from "./portal.js";
// Times shown in the reader's own time zone.
document.querySelectorAll("time.local-time").forEach((t) => {
  const d = new Date(t.getAttribute("datetime"));
  if (!isNaN(d)) t.textContent = d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
});

// API keys: the new key is shown once, with a Copy button; a row joins the table.
const keyForm = $("key-form");
const dateTime = (iso) => iso.slice(0, 16).replace("T", " ");
function keyBody() {
  const days = Number($("key-expires").value);
  const body = { name: $("key-name").value };
  if (days) body.expires_at = new Date(Date.now() + days * 86400000).toISOString();
  return body;
}
if (keyForm) {
  setBodyBuilder(keyForm, keyBody);
  keyForm.addEventListener("api:done", (e) => {
    const key = e.detail;
    const box = $("new-key");
    $("new-key-value").value = key.key;
    box.hidden = false;
    box.focus();
    const tbody = document.querySelector("#keys tbody");
    const empty = tbody.querySelector(".empty");
    if (empty) empty.remove();
    const tr = document.createElement("tr");
    tr.dataset.row = "";
    const expires = key.expires_at ? dateTime(key.expires_at) : "never";
    const cells = [key.name || "(unnamed)", key.prefix + "…", dateTime(key.created_at), expires, "never"];
    for (const text of cells) {
      const td = document.createElement("td");
      td.textContent = text;
      tr.appendChild(td);
    }
    const td = document.createElement("td");
    const b = document.createElement("button");
    b.type = "button";
    b.className = "danger small";
    b.textContent = "Revoke";
    b.dataset.api = "/api/v1/auth/keys/" + encodeURIComponent(key.id);
    b.dataset.method = "DELETE";
    b.dataset.confirm = "Revoke this key? Programs using it stop working at once.";
    b.dataset.after = "remove";
    td.appendChild(b);
    tr.appendChild(td);
    tbody.prepend(tr);
    $("key-name").value = "";
    $("key-expires").value = "";
  });
}

// Jobs: "Run now" follows the run until it ends, in the row (no reload).
const showTime = (iso) => new Date(iso).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
document.querySelectorAll("button[data-job-run]").forEach((b) => {
  b.addEventListener("api:done", () => {
    const row = b.closest("tr");
    const cell = row && row.querySelector('[data-cell="last-run"]');
    const out = row && row.querySelector("output.form-status");
    const started = Date.now();
    const poll = async () => {
      const r = await api("GET", b.dataset.jobRun);
      if (r.ok && cell && r.data.last_run_at) {
        const time = document.createElement("time");
        time.dateTime = r.data.last_run_at;
        time.textContent = showTime(r.data.last_run_at);
        const badge = document.createElement("span");
        badge.className = "badge status-" + r.data.last_status;
        badge.textContent = r.data.last_status;
        cell.replaceChildren(time, " ", badge);
        if (r.data.last_status !== "running") {
          if (out) out.textContent = "Finished: " + r.data.last_status + ".";
          refreshInbox(); // its result may be there
          return;
        }
      }
      if (Date.now() - started < 120000) window.setTimeout(poll, 700);
    };
    if (out) out.textContent = "Running…";
    poll();
  });
});

// Providers: "Test connection" shows what the endpoint answered; the server keeps the models it
// found (discovered_models), and the model fields offer them at once.
const offerModels = (list, names) => {
  if (!list) return;
  const have = new Set(Array.from(list.options).map((o) => o.value));
  names.filter((n) => !have.has(n)).forEach((n) => { const o = document.createElement("option"); o.value = n; list.append(o); });
};
document.querySelectorAll("button.provider-test").forEach((b) => {
  b.addEventListener("api:done", (e) => {
    const out = $(b.dataset.target);
    const r = e.detail || {};
    out.classList.toggle("error", !r.ok);
    out.classList.toggle("ok", !!r.ok);
    out.textContent = r.ok
      ? "Connected. Models: " + ((r.models || []).join(", ") || "(none listed)") + (r.models && r.models.length ? " — offered in the model fields." : "")
      : "Failed: " + ((r.error && r.error.message) || "no answer");
    if (r.ok) { offerModels($(b.dataset.modelsList), r.models || []); offerModels($("all-models"), r.models || []); }
  });
});

// A tool server's "Test" button: its answer goes into the element the button names, as a failure or as
// what `describe` makes of a successful answer.
function onTestResult(selector, describe) {
  document.querySelectorAll(selector).forEach((b) => {
    b.addEventListener("api:done", (e) => {
      const out = $(b.dataset.target);
      const r = e.detail || {};
      out.classList.toggle("error", !r.ok);
      out.classList.toggle("ok", !!r.ok);
      out.textContent = r.ok ? describe(r) : "Failed: " + ((r.error && r.error.message) || "no answer");
    });
  });
}

// MCP servers: "Test" lists the tools the server offers (or says why it could not).
onTestResult("button.mcp-test", (r) => {
  const names = (r.tools || []).map((t) => t.name);
  return names.length
    ? "It answered with " + names.length + " tool" + (names.length === 1 ? "" : "s") + ": " + names.join(", ") + "."
    : "It answered, but offers no tools.";
});

// ACP runners: "Test" starts the runner, shakes hands (ACP initialize) and says who answered.
onTestResult("button.runner-test", (r) => {
  const info = r.agent_info || {};
  const who = info.name ? (info.title || info.name) + (info.version ? " " + info.version : "") : "The runner";
  const caps = r.capabilities || {};
  const prompt = caps.promptCapabilities || {};
  const can = ["image", "audio", "embeddedContext"].filter((k) => prompt[k]);
  return who + " answered (ACP protocol " + r.protocol_version + ")" +
    (caps.loadSession ? ", can resume sessions" : "") +
    (can.length ? ", accepts " + can.join(", ") : "") + ". It was stopped again.";
});

// MCP server forms show the fields of the chosen transport only (hidden fields are not sent).
document.querySelectorAll("form[data-transport-form]").forEach((form) => {
  const select = form.querySelector("[data-transport]");
  const sync = () => {
    form.querySelectorAll("[data-for-transport]").forEach((box) => { box.hidden = box.dataset.forTransport !== select.value; });
  };
  select.addEventListener("change", sync);
  sync();
});

// A new ACP runner or MCP server: its name is part of the URL.
document.querySelectorAll("form[data-named-new]").forEach((form) => {
  const name = form.querySelector("[data-new-name]");
  const base = form.dataset.api;
  const sync = () => { form.dataset.api = base + encodeURIComponent(name.value.trim()); };
  name.addEventListener("input", sync);
  sync();
});

// Cron job form: the schedule in words and the next run times, as you type.
const jobForm = $("job-form");
if (jobForm) {
  const words = $("schedule-words");
  const kind = () => jobForm.querySelector('input[name="schedule_type"]:checked').value;
  const onceIso = () => {
    const v = $("job-at").value;
    return v ? new Date(v).toISOString() : "";
  };
  let timer = null;
  const preview = () => {
    window.clearTimeout(timer);
    timer = window.setTimeout(async () => {
      const params = new URLSearchParams({ type: kind(), timezone: $("job-tz").value || "UTC" });
      if (kind() === "cron") params.set("cron", $("job-cron").value);
      if (kind() === "interval") params.set("every_seconds", $("job-every").value);
      if (kind() === "once") params.set("run_at", onceIso());
      const r = await fetch(words.dataset.preview + "?" + params, { credentials: "same-origin" });
      const data = await r.json();
      words.replaceChildren();
      if (!data.ok) {
        words.className = "schedule-words error";
        words.textContent = data.error;
        return;
      }
      words.className = "schedule-words";
      const p = document.createElement("p");
      p.textContent = data.description.charAt(0).toUpperCase() + data.description.slice(1) + ".";
      words.appendChild(p);
      if (data.next.length) {
        const label = document.createElement("span");
        label.textContent = "Next runs:";
        const ul = document.createElement("ul");
        for (const t of data.next) {
          const li = document.createElement("li");
          li.textContent = new Date(t).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
          ul.appendChild(li);
        }
        words.append(label, ul);
      }
    }, 200);
  };
  const showKind = () => {
    jobForm.querySelectorAll("[data-schedule]").forEach((box) => { box.hidden = box.dataset.schedule !== kind(); });
    preview();
  };
  jobForm.querySelectorAll('input[name="schedule_type"]').forEach((r) => r.addEventListener("change", showKind));
  ["job-cron", "job-every", "job-at", "job-tz"].forEach((id) => $(id).addEventListener("input", preview));
  showKind();

  setBodyBuilder(jobForm, () => {
    const type = kind();
    const schedule = { type: type, timezone: $("job-tz").value || "UTC" };
    if (type === "cron") schedule.cron = $("job-cron").value.trim();
    if (type === "interval") schedule.every_seconds = Number($("job-every").value);
    if (type === "once") schedule.run_at = onceIso();
    const task = jobForm.querySelector('input[name="task_type"]:checked').value;
    const text = $("job-text").value;
    const name = $("job-name").value.trim();
    let target = $("job-target").value;
    if (!target) {
      const slug = name.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "").slice(0, 40) || "job";
      target = "job-" + slug + "-" + Math.random().toString(36).slice(2, 8);
    }
    const body = {
      name: name,
      agent: $("job-agent").value,
      schedule: schedule,
      task_type: task,
      dispatch: { type: "channel", channel: "console", target: { session_id: target }, mode: "final" },
      save_result_to_inbox: $("job-inbox").checked,
    };
    if (task === "agent") body.request = { input: [{ role: "user", type: "message", content: [{ type: "text", text: text }] }] };
    else body.text = text;
    return body;
  });
}
