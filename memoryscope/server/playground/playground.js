// MemoryScope playground: chat with memory, and watch the memories change as they are made.
// It uses the server's public API only (/v1), with the API key typed in at the top.
"use strict";

const POLL_MS = 2000;          // how often the memory viewer asks for changes while the tab is shown
const CHAT_KEPT = 200;         // the newest messages of a user's chat kept in this browser
let GROUPS = [                 // memory types in the viewer's order, replaced by the server's registry at start
  ["insight", "Insight memory"],
  ["obs_customized", "Added memory"],
  ["observation", "Observation memory"],
  ["conversation", "Conversation memory"],
];
const OPERATION_LABELS = {
  consolidate_memory: "Consolidate", reflect_and_reconsolidate: "Reflect",
  memoryos_update: "Update tiers", memoryos_force_update: "Promote the hottest now",
};

const $ = (id) => document.getElementById(id);
const state = {
  user: "",
  modelId: "memoryscope",
  history: [],                 // this tab's conversation, sent with each message
  shownJson: "",               // the memory list last drawn, to redraw only on a change
  knownIds: null,              // ids seen before: new ones are highlighted
  polling: false,
  busy: false,
  unknownUser: false,          // the server knows no memory of the user: not asked again until something changes
  policy: "memoryscope",       // the memory policy the server keeps (GET /v1/operations)
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
  let usage = null;
  try {
    const response = await fetch("/v1/chat/completions", {
      method: "POST",
      headers: headers(true),
      body: JSON.stringify({ model: state.modelId, user: state.user, stream: true, stream_options: { include_usage: true }, messages }),
    });
    if (!response.ok) await readJson(response);  // throws the server's error
    state.unknownUser = false;  // the message is stored: the user exists now
    for await (const event of serverEvents(response)) {
      if (event.error) throw new ApiError(event.error.status || 500, event.error.code, event.error.message);
      if (event.memoryscope) extension = event.memoryscope;
      if (event.usage) usage = event.usage;
      const delta = (event.choices && event.choices[0] && event.choices[0].delta) || {};
      if (delta.content) {
        if (firstToken === null) firstToken = performance.now() - started;
        content += delta.content;
        reply.textContent = content;
        reply.parentElement.scrollIntoView({ block: "end" });
      }
    }
    state.history = messages.concat([{ role: "assistant", content }]);
    keepChat();
    showLastReply(extension, { "first token (browser)": firstToken, "whole reply (browser)": performance.now() - started });
  } catch (error) {
    reply.parentElement.classList.add("error");
    reply.textContent = content + (content ? "\n" : "") + "⚠ " + explain(error);
  } finally {
    reply.parentElement.removeAttribute("aria-busy");
  }
  refreshMemories(true);
  refreshStatus();
  if (window.afterTurn) window.afterTurn(extension, usage);
}

// The chat of each user is kept in this browser (localStorage), the newest CHAT_KEPT messages.
function chatKey(user) {
  return "memoryscope.chat." + user;
}

function keepChat() {
  try {
    localStorage.setItem(chatKey(state.user), JSON.stringify(state.history.slice(-CHAT_KEPT)));
  } catch (_) {
    // a full or disabled storage: the chat is simply not kept
  }
}

function restoreChat() {
  let kept = [];
  try {
    kept = JSON.parse(localStorage.getItem(chatKey(state.user)) || "[]");
  } catch (_) {
    kept = [];
  }
  state.history = Array.isArray(kept) ? kept.filter((m) => m && typeof m.content === "string" && (m.role === "user" || m.role === "assistant")) : [];
  for (const message of state.history) addBubble(message.role, message.content);
}

function forgetChat() {
  localStorage.removeItem(chatKey(state.user));
  state.history = [];
  $("messages").replaceChildren();
  $("chat-input").focus();
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

// ---- operations and status ------------------------------------------------------------

async function deleteAll() {
  if (!window.confirm("Delete every memory of " + state.user + "?")) return;
  try {
    const done = await api("DELETE", userPath("/memories"));
    setOperationStatus("Deleted " + (done && done.deleted !== undefined ? done.deleted + " memories" : "all memories"));
  } catch (error) {
    setOperationStatus("Could not delete: " + explain(error), true);
  }
  state.shownJson = "";
  refreshMemories(true);
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
  state.unknownUser = false;
  state.shownJson = "";
  refreshMemories(true);
}

async function loadOperations() {
  const holder = $("operation-buttons");
  try {
    const found = await api("GET", "/v1/operations");
    state.policy = found.policy || "memoryscope";
    document.body.dataset.policy = state.policy;
    holder.replaceChildren();
    // under MemoryOS its own operations only: MemoryScope's consolidation does not feed its tiers
    const shown = found.operations.filter((op) => op.backend && (state.policy !== "memoryos" || op.name.startsWith("memoryos_")));
    for (const operation of shown) {
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
  if (!state.user || state.unknownUser) return;
  const line = $("scheduler-status");
  try {
    const status = await api("GET", userPath("/status"));
    const running = status.running.map((run) => run.operation + " is running");
    const pending = status.pending_messages;
    const waiting = pending && pending.pending ? [pending.pending + " messages wait for consolidation"] : [];
    line.textContent = running.concat(waiting).join(" · ") || (status.scheduler.enabled ? "Background memory work is idle." : "");
    if (window.noteStatus) window.noteStatus(status);
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
  state.shownJson = "";
  state.knownIds = null;
  state.unknownUser = false;
  resetViewer();
  localStorage.setItem("memoryscope.user", state.user);
  $("user-name").value = state.user;
  $("memories-user").textContent = state.user;
  $("messages").replaceChildren();
  restoreChat();
  notify("Chatting as " + state.user + ".");
  refreshMemories(true);
  refreshStatus();
}

async function start() {
  const asked = new URLSearchParams(location.search).get("user");
  $("api-key").value = sessionStorage.getItem("memoryscope.key") || "";
  $("api-key").addEventListener("change", () => {
    sessionStorage.setItem("memoryscope.key", $("api-key").value.trim());
    loadOperations();
    state.shownJson = "";
    state.unknownUser = false;
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
  $("refresh").addEventListener("click", () => { state.shownJson = ""; state.unknownUser = false; poll(); });
  $("delete-all").addEventListener("click", deleteAll);
  $("forget-chat").addEventListener("click", forgetChat);
  startViewer();
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
  if (window.startPolicyView) await window.startPolicyView();
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
  drawTypeFilter();
}

document.addEventListener("DOMContentLoaded", start);
