// MemoryScope playground: chat with memory, and watch the memories change as they are made.
// It uses the server's public API only (/v1), with the API key typed in at the top.
"use strict";

const POLL_MS = 2000;          // how often the memory viewer asks for changes while the tab is shown
const LIST_LIMIT = 500;        // the newest memories the viewer lists
let GROUPS = [                 // memory types in the viewer's order, replaced by the server's registry at start
  ["insight", "Insight memory"],
  ["obs_customized", "Added memory"],
  ["observation", "Observation memory"],
  ["conversation", "Conversation memory"],
];
const ALWAYS_SHOWN = new Set(["insight", "observation", "conversation"]);  // even when empty
const FRESH_MS = 4000;         // how long a memory that just appeared stays highlighted
const OPERATION_LABELS = { consolidate_memory: "Consolidate", reflect_and_reconsolidate: "Reflect" };

const $ = (id) => document.getElementById(id);
const state = {
  user: "",
  modelId: "memoryscope",
  history: [],                 // this tab's conversation, sent with each message
  shownJson: "",               // the memory list last drawn, to redraw only on a change
  knownIds: null,              // ids seen before: new ones are highlighted
  polling: false,
  busy: false,
};

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

function headers(json) {
  const out = {};
  if (json) out["Content-Type"] = "application/json";
  const key = $("api-key").value.trim();
  if (key) out["Authorization"] = "Bearer " + key;
  return out;
}

async function api(method, path, body) {
  const response = await fetch(path, {
    method,
    headers: headers(body !== undefined),
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return readJson(response);
}

async function readJson(response) {
  let payload = null;
  try {
    payload = await response.json();
  } catch (_) {
    payload = null;
  }
  if (!response.ok) {
    const error = (payload && payload.error) || {};
    throw new ApiError(response.status, error.code || "http_" + response.status, error.message || response.statusText);
  }
  return payload;
}

function userPath(suffix) {
  return "/v1/users/" + encodeURIComponent(state.user) + suffix;
}

function notify(text, isError) {
  const notice = $("notice");
  notice.textContent = text;
  notice.classList.toggle("error", Boolean(isError));
}

function explain(error) {
  if (error instanceof ApiError && error.status === 401) return error.message + " — type it in the API key box.";
  return error.message || String(error);
}

function shortTime(iso) {
  // "2024-10-26T21:26:20.5+08:00" → "2024-10-26 21:26 +08:00"; a time of day of 00:00 is a date only
  if (!iso) return "";
  const shown = iso.replace("T", " ").replace(/(\d\d:\d\d):\d\d(\.\d+)?/, "$1").replace(/\+00:00$|Z$/, " UTC");
  return shown.replace(/ 00:00( UTC|[+-]\d\d:\d\d)?$/, "");
}

// ---- chat -------------------------------------------------------------------------------

function addBubble(role, text) {
  const item = document.createElement("li");
  item.className = "message " + role;
  const who = document.createElement("span");
  who.className = "who";
  who.textContent = role === "user" ? state.user : "assistant";
  const body = document.createElement("span");
  body.className = "body";
  body.textContent = text;
  item.append(who, body);
  $("messages").append(item);
  item.scrollIntoView({ block: "end" });
  return body;
}

async function sendMessage(text) {
  const messages = state.history.concat([{ role: "user", content: text }]);
  addBubble("user", text);
  const reply = addBubble("assistant", "");
  reply.parentElement.setAttribute("aria-busy", "true");
  const started = performance.now();
  let firstToken = null;
  let content = "";
  let extension = null;
  try {
    const response = await fetch("/v1/chat/completions", {
      method: "POST",
      headers: headers(true),
      body: JSON.stringify({ model: state.modelId, user: state.user, stream: true, messages }),
    });
    if (!response.ok) await readJson(response);  // throws the server's error
    for await (const event of serverEvents(response)) {
      if (event.error) throw new ApiError(event.error.status || 500, event.error.code, event.error.message);
      if (event.memoryscope) extension = event.memoryscope;
      const delta = (event.choices && event.choices[0] && event.choices[0].delta) || {};
      if (delta.content) {
        if (firstToken === null) firstToken = performance.now() - started;
        content += delta.content;
        reply.textContent = content;
        reply.parentElement.scrollIntoView({ block: "end" });
      }
    }
    state.history = messages.concat([{ role: "assistant", content }]);
    showLastReply(extension, { "first token (browser)": firstToken, "whole reply (browser)": performance.now() - started });
  } catch (error) {
    reply.parentElement.classList.add("error");
    reply.textContent = content + (content ? "\n" : "") + "⚠ " + explain(error);
  } finally {
    reply.parentElement.removeAttribute("aria-busy");
  }
  refreshMemories();
}

async function* serverEvents(response) {
  // the reply as server-sent events: "data: {json}" blocks, "data: [DONE]" at the end
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    buffer += decoder.decode(value || new Uint8Array(), { stream: !done });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = block.split("\n").filter((line) => line.startsWith("data:")).map((line) => line.slice(5).trim()).join("\n");
      if (!data) continue;
      if (data === "[DONE]") return;
      yield JSON.parse(data);
    }
    if (done) return;
  }
}

function showLastReply(extension, browserTimings) {
  $("last-reply-empty").hidden = true;
  const used = $("used-memories");
  used.replaceChildren();
  const lines = (extension && extension.memories) || [];
  if (!lines.length) {
    const none = document.createElement("li");
    none.className = "empty";
    none.textContent = "none: no memory matched, or the user has none yet";
    used.append(none);
  }
  for (const line of lines) {
    const item = document.createElement("li");
    item.textContent = line;
    used.append(item);
  }
  const rows = $("timings").tBodies[0];
  rows.replaceChildren();
  const serverTimings = (extension && extension.timings) || {};
  const all = Object.entries(serverTimings).map(([step, seconds]) => [step, seconds * 1000]);
  for (const [step, ms] of Object.entries(browserTimings)) if (ms !== null) all.push([step, ms]);
  for (const [step, ms] of all) {
    const row = rows.insertRow();
    row.insertCell().textContent = step;
    row.insertCell().textContent = ms.toFixed(1);
  }
}

// ---- memory viewer ----------------------------------------------------------------------

async function refreshMemories() {
  if (!state.user) return;
  const user = state.user;
  let memories;
  try {
    const found = await api("GET", userPath("/memories?include_expired=true&limit=" + LIST_LIMIT));
    memories = found.memories;
  } catch (error) {
    if (error instanceof ApiError && error.code === "unknown_user") memories = [];
    else return notify("Could not list memories: " + explain(error), true);
  }
  if (user !== state.user) return;  // switched meanwhile
  const json = JSON.stringify(memories) + $("show-expired").checked;
  if (json === state.shownJson) return;
  state.shownJson = json;
  drawMemories(memories);
}

function drawMemories(memories) {
  const focusedId = document.activeElement && document.activeElement.closest && document.activeElement.closest(".memory");
  const refocus = focusedId ? focusedId.id : null;
  const showExpired = $("show-expired").checked;
  const byId = new Map(memories.map((memory) => [memory.id, memory]));
  const fresh = state.knownIds === null ? new Set() : new Set(memories.filter((m) => !state.knownIds.has(m.id)).map((m) => m.id));
  state.knownIds = new Set(byId.keys());
  const container = $("memory-groups");
  container.replaceChildren();
  const known = new Set(GROUPS.map(([type]) => type));
  const groups = GROUPS.concat([...new Set(memories.map((m) => m.memory_type))].filter((t) => !known.has(t)).map((t) => [t, t]));
  for (const [type, title] of groups) {
    const members = memories.filter((memory) => memory.memory_type === type && (showExpired || memory.status !== "expired"));
    if (!members.length && !ALWAYS_SHOWN.has(type)) continue;
    const section = document.createElement("section");
    section.className = "memory-group";
    section.dataset.type = type;
    const heading = document.createElement("h3");
    heading.textContent = title + " ";
    const count = document.createElement("span");
    count.className = "count";
    count.textContent = "(" + members.length + ")";
    heading.append(count);
    section.append(heading);
    if (!members.length) {
      const empty = document.createElement("p");
      empty.className = "empty";
      empty.textContent = "none yet";
      section.append(empty);
    } else {
      const list = document.createElement("ul");
      list.className = "memory-list";
      for (const memory of members) list.append(memoryItem(memory, byId, fresh.has(memory.id)));
      section.append(list);
    }
    container.append(section);
  }
  if (refocus && $(refocus)) $(refocus).querySelector("button").focus();
  if (fresh.size) setTimeout(() => document.querySelectorAll(".memory.fresh").forEach((item) => item.classList.remove("fresh")), FRESH_MS);
}

function memoryItem(memory, byId, isFresh) {
  const item = $("memory-template").content.firstElementChild.cloneNode(true);
  item.id = "memory-" + memory.id;
  item.dataset.id = memory.id;
  item.dataset.status = memory.status;
  item.classList.toggle("expired", memory.status === "expired");
  item.classList.toggle("fresh", isFresh);
  item.querySelector(".memory-text").textContent = memory.memory;
  const meta = item.querySelector(".memory-meta");
  const status = document.createElement("span");
  status.className = "status";
  status.textContent = memory.status;
  const parts = memory.memory_type === "conversation"
    ? [(memory.role || "said") + " " + shortTime(memory.message_time || memory.time)]
    : ["learnt " + shortTime(memory.created_at)];
  if (memory.event_time) parts.push("happened " + shortTime(memory.event_time));
  if (shortTime(memory.updated_at) !== shortTime(memory.created_at)) parts.push("updated " + shortTime(memory.updated_at));
  meta.append(parts.join(" · ") + " ", status);
  const link = item.querySelector(".memory-link");
  if (memory.superseded_by) {
    const newer = byId.get(memory.superseded_by);
    const anchor = document.createElement("a");
    anchor.href = "#memory-" + memory.superseded_by;
    anchor.textContent = newer ? newer.memory : memory.superseded_by;
    link.append("replaced by ", anchor);
  } else {
    link.remove();
  }
  const remove = item.querySelector(".delete-one");
  remove.setAttribute("aria-label", "Delete memory: " + memory.memory);
  remove.addEventListener("click", () => deleteMemory(memory));
  return item;
}

async function deleteMemory(memory) {
  try {
    await api("DELETE", "/v1/memories/" + encodeURIComponent(memory.id));
    setOperationStatus("Deleted: " + memory.memory);
  } catch (error) {
    setOperationStatus("Could not delete: " + explain(error), true);
  }
  refreshMemories();
}

async function deleteAll() {
  if (!window.confirm("Delete every memory of " + state.user + "?")) return;
  try {
    const done = await api("DELETE", userPath("/memories"));
    setOperationStatus("Deleted " + (done && done.deleted !== undefined ? done.deleted + " memories" : "all memories"));
  } catch (error) {
    setOperationStatus("Could not delete: " + explain(error), true);
  }
  refreshMemories();
}

function setOperationStatus(text, isError) {
  const line = $("operation-status");
  line.textContent = text;
  line.classList.toggle("error", Boolean(isError));
}

async function runOperation(name, button) {
  const buttons = document.querySelectorAll("#operation-buttons button");
  buttons.forEach((b) => (b.disabled = true));
  setOperationStatus("Running " + name + "…");
  try {
    const run = await api("POST", userPath("/operations/" + encodeURIComponent(name)), {});
    const steps = run.timings.map(([worker, seconds]) => worker + " " + (seconds * 1000).toFixed(0) + " ms").join(", ");
    const said = typeof run.result === "string" && run.result ? run.result : run.memories.length + " memories";
    setOperationStatus(name + ": " + said + " (" + run.total_seconds.toFixed(2) + " s" + (steps ? ": " + steps : "") + ")");
  } catch (error) {
    setOperationStatus(name + " failed: " + explain(error), true);
  } finally {
    buttons.forEach((b) => (b.disabled = false));
    button.focus();
  }
  refreshMemories();
}

async function loadOperations() {
  const holder = $("operation-buttons");
  try {
    const found = await api("GET", "/v1/operations");
    holder.replaceChildren();
    for (const operation of found.operations.filter((op) => op.backend)) {
      const button = document.createElement("button");
      button.type = "button";
      button.dataset.operation = operation.name;
      button.textContent = OPERATION_LABELS[operation.name] || operation.name.replace(/_/g, " ");
      button.title = operation.description || operation.name;
      button.addEventListener("click", () => runOperation(operation.name, button));
      holder.append(button);
    }
  } catch (error) {
    notify("Could not list the operations: " + explain(error), true);
  }
}

async function refreshStatus() {
  if (!state.user) return;
  const line = $("scheduler-status");
  try {
    const status = await api("GET", userPath("/status"));
    const running = status.running.map((run) => run.operation + " is running");
    const pending = status.pending_messages;
    const waiting = pending && pending.pending ? [pending.pending + " messages wait for consolidation"] : [];
    line.textContent = running.concat(waiting).join(" · ") || (status.scheduler.enabled ? "Background memory work is idle." : "");
  } catch (_) {
    line.textContent = "";
  }
}

async function loadConfig() {
  const text = $("config-text");
  try {
    text.textContent = JSON.stringify(await api("GET", "/v1/config"), null, 2);
  } catch (error) {
    text.textContent = error.status === 403 ? "Showing the config needs an admin API key." : "Could not load: " + explain(error);
  }
}

async function poll() {
  if (state.polling || document.visibilityState !== "visible") return;
  state.polling = true;
  try {
    await Promise.all([refreshMemories(), refreshStatus()]);
  } finally {
    state.polling = false;
  }
}

// ---- set-up -----------------------------------------------------------------------------

function switchUser(name) {
  state.user = name.trim();
  state.history = [];
  state.shownJson = "";
  state.knownIds = null;
  localStorage.setItem("memoryscope.user", state.user);
  $("user-name").value = state.user;
  $("memories-user").textContent = state.user;
  $("messages").replaceChildren();
  notify("Chatting as " + state.user + ".");
  refreshMemories();
  refreshStatus();
}

async function start() {
  const asked = new URLSearchParams(location.search).get("user");
  $("api-key").value = sessionStorage.getItem("memoryscope.key") || "";
  $("api-key").addEventListener("change", () => {
    sessionStorage.setItem("memoryscope.key", $("api-key").value.trim());
    loadOperations();
    state.shownJson = "";
    poll();
  });
  $("user-form").addEventListener("submit", (event) => {
    event.preventDefault();
    if ($("user-name").value.trim()) switchUser($("user-name").value);
  });
  $("chat-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const input = $("chat-input");
    const text = input.value.trim();
    if (!text || state.busy) return;
    state.busy = true;
    $("send").disabled = true;
    input.value = "";
    try {
      await sendMessage(text);
    } finally {
      state.busy = false;
      $("send").disabled = false;
      const focused = document.activeElement;
      if (!focused || focused === document.body || focused === $("send")) input.focus();  // unless the user moved on
    }
  });
  $("chat-input").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("chat-form").requestSubmit();
    }
  });
  $("refresh").addEventListener("click", () => { state.shownJson = ""; poll(); });
  $("delete-all").addEventListener("click", deleteAll);
  $("show-expired").addEventListener("change", () => { state.shownJson = ""; refreshMemories(); });
  $("config-details").addEventListener("toggle", () => { if ($("config-details").open) loadConfig(); });
  document.addEventListener("visibilitychange", poll);
  switchUser(asked || localStorage.getItem("memoryscope.user") || "user");
  try {
    const models = await api("GET", "/v1/models");
    if (models.data && models.data.length) state.modelId = models.data[0].id;
  } catch (error) {
    notify(explain(error), true);
  }
  await loadMemoryTypes();
  await loadOperations();
  setInterval(poll, POLL_MS);
}

// The groups of the memory viewer: the types the server registered (`/v1/memory-types`), in its order.
async function loadMemoryTypes() {
  try {
    const answer = await api("GET", "/v1/memory-types");
    const listed = answer.memory_types.filter((type) => type.listed);
    if (listed.length) {
      GROUPS = listed.map((type) => {
        const label = type.labels.en || type.name.replaceAll("_", " ");
        return [type.name, label.charAt(0).toUpperCase() + label.slice(1)];
      });
      state.shownJson = "";
    }
  } catch (error) {
    notify(explain(error), true);
  }
}

document.addEventListener("DOMContentLoaded", start);
