// MemoryScope playground, the memory viewer: groups by memory type, each paged (the store is read a
// page at a time, so 10k memories cost what 20 do), search with the API's filters, and each memory's
// edit, pin, history and undo. Every change goes through the server's /v1 routes; nothing is decided here.
"use strict";

const PAGE_SIZE = 20;          // memories per group and page
const SEARCH_TOP_K = 50;       // the best matches a search shows
const FRESH_MS = 4000;         // how long a memory that just appeared stays highlighted
const ALWAYS_SHOWN = new Set(["insight", "observation", "conversation"]);  // even when empty

const viewer = {
  offsets: new Map(),          // memory type -> the offset of the page shown
  search: null,                // {query, types, since, until, filters} while a search or filter is on
  resolved: new Map(),         // id -> the replacement memory (null: deleted), for "replaced by" links
  openHistory: new Set(),      // ids whose history is shown (kept across redraws)
  editing: null,               // the id being edited: no redraw meanwhile
};

function typeLabel(type) {
  const found = GROUPS.find(([name]) => name === type);
  return found ? found[1] : type.replaceAll("_", " ");
}

// ---- reading ------------------------------------------------------------------------------

function listQuery(type, offset) {
  const params = new URLSearchParams({ include_expired: String($("show-expired").checked), limit: String(PAGE_SIZE + 1), offset: String(offset) });
  params.append("type", type);
  const search = viewer.search;
  if (search) {
    if (search.since) params.set("since", search.since);
    if (search.until) params.set("until", search.until);
    if (search.filters) params.set("filters", JSON.stringify(search.filters));
  }
  return userPath("/memories?" + params);
}

// The groups shown: the server's listed types (or those the filter names), each a page from its offset.
async function readGroups() {
  const wanted = viewer.search && viewer.search.types.length ? viewer.search.types : GROUPS.map(([type]) => type);
  const pages = await Promise.all(wanted.map(async (type) => {
    const offset = viewer.offsets.get(type) || 0;
    const found = await api("GET", listQuery(type, offset));
    return { type, offset, memories: found.memories.slice(0, PAGE_SIZE), more: found.memories.length > PAGE_SIZE };
  }));
  return pages;
}

async function readSearch() {
  const search = viewer.search;
  const body = { query: search.query, top_k: SEARCH_TOP_K };
  if (search.types.length) body.types = search.types;
  if (search.since) body.since = search.since;
  if (search.until) body.until = search.until;
  if (search.filters) body.filters = search.filters;
  const found = await api("POST", userPath("/search"), body);
  return [{ type: "results", title: "Search results for “" + search.query + "”", offset: 0, memories: found.memories, more: false }];
}

// Called by the poll, after a change and on demand. An unknown user (no memory yet) is asked about
// again only after something of theirs changed here (a message, an added memory) or on Refresh.
async function refreshMemories(force) {
  if (!state.user || (state.unknownUser && !force) || viewer.editing) return;
  if (!force && viewer.search && viewer.search.query) return;  // a search's results stay until asked again
  const user = state.user;
  let groups;
  try {
    groups = viewer.search && viewer.search.query ? await readSearch() : await readGroups();
    state.unknownUser = false;
  } catch (error) {
    if (error instanceof ApiError && error.code === "unknown_user") {
      state.unknownUser = true;
      groups = viewer.search && viewer.search.query ? [] : GROUPS.map(([type]) => ({ type, offset: 0, memories: [], more: false }));
    } else {
      return notify("Could not list memories: " + explain(error), true);
    }
  }
  if (user !== state.user) return;  // switched meanwhile
  if (window.refreshPolicyView) window.refreshPolicyView();
  const json = JSON.stringify(groups) + $("show-expired").checked;
  if (json === state.shownJson) return;
  state.shownJson = json;
  await resolveReplacements(groups);
  drawGroups(groups);
}

// "replaced by" names the replacement: on this page, else read once by id (deleted: null).
async function resolveReplacements(groups) {
  const shown = new Map();
  for (const group of groups) for (const memory of group.memories) shown.set(memory.id, memory);
  const missing = new Set();
  for (const group of groups) {
    for (const memory of group.memories) {
      const id = memory.superseded_by;
      if (id && !shown.has(id) && !viewer.resolved.has(id)) missing.add(id);
      if (id && shown.has(id)) viewer.resolved.set(id, shown.get(id));
    }
  }
  await Promise.all([...missing].map(async (id) => {
    try {
      viewer.resolved.set(id, await api("GET", "/v1/memories/" + encodeURIComponent(id)));
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) viewer.resolved.set(id, null);
    }
  }));
}

// ---- drawing ------------------------------------------------------------------------------

function drawGroups(groups) {
  const active = document.activeElement;
  const activeItem = active && active.closest ? active.closest(".memory, .memory-group") : null;
  const refocus = activeItem ? [activeItem.id, active.dataset.role || ""] : null;
  const all = groups.flatMap((group) => group.memories);
  const fresh = state.knownIds === null ? new Set() : new Set(all.filter((m) => !state.knownIds.has(m.id)).map((m) => m.id));
  state.knownIds = new Set([...(state.knownIds || []), ...all.map((m) => m.id)]);
  const container = $("memory-groups");
  container.replaceChildren();
  for (const group of groups) {
    const { type, memories, offset, more } = group;
    const alwaysShown = ALWAYS_SHOWN.has(type) && state.policy === "memoryscope";
    if (!memories.length && !offset && !alwaysShown && type !== "results" && !viewer.search) continue;
    const section = document.createElement("section");
    section.className = "memory-group";
    section.id = "group-" + type;
    section.dataset.type = type;
    const heading = document.createElement("h3");
    heading.textContent = (group.title || typeLabel(type)) + " ";
    const count = document.createElement("span");
    count.className = "count";
    count.textContent = offset || more ? "(" + (offset + 1) + "–" + (offset + memories.length) + (more ? ", more" : "") + ")" : "(" + memories.length + ")";
    heading.append(count);
    section.append(heading);
    if (!memories.length) {
      const empty = document.createElement("p");
      empty.className = "empty";
      empty.textContent = type === "results" ? "nothing matched" : "none yet";
      section.append(empty);
    } else {
      const list = document.createElement("ul");
      list.className = "memory-list";
      for (const memory of memories) list.append(memoryItem(memory, fresh.has(memory.id)));
      section.append(list);
    }
    if (offset || more) section.append(pager(type, offset, more));
    container.append(section);
  }
  if (refocus && $(refocus[0])) {
    const again = $(refocus[0]).querySelector(`[data-role="${refocus[1]}"]`) || $(refocus[0]).querySelector("button");
    if (again) again.focus();
  }
  if (fresh.size) setTimeout(() => document.querySelectorAll(".memory.fresh").forEach((item) => item.classList.remove("fresh")), FRESH_MS);
}

function pager(type, offset, more) {
  const nav = document.createElement("nav");
  nav.className = "pager";
  nav.setAttribute("aria-label", typeLabel(type) + " pages");
  const newer = button("Newer", "newer", () => turnPage(type, Math.max(0, offset - PAGE_SIZE)));
  newer.disabled = offset === 0;
  const older = button("Older", "older", () => turnPage(type, offset + PAGE_SIZE));
  older.disabled = !more;
  nav.append(newer, older);
  return nav;
}

function turnPage(type, offset) {
  viewer.offsets.set(type, offset);
  state.shownJson = "";
  refreshMemories(true);
}

function button(text, role, onClick, className) {
  const made = document.createElement("button");
  made.type = "button";
  made.textContent = text;
  made.dataset.role = role;
  if (className) made.className = className;
  made.addEventListener("click", onClick);
  return made;
}

function memoryItem(memory, isFresh) {
  const item = $("memory-template").content.firstElementChild.cloneNode(true);
  item.id = "memory-" + memory.id;
  item.dataset.id = memory.id;
  item.dataset.status = memory.status;
  item.dataset.pinned = String(Boolean(memory.pinned));
  item.classList.toggle("expired", memory.status === "expired");
  item.classList.toggle("fresh", isFresh);
  item.querySelector(".memory-text").textContent = memory.memory;
  item.querySelector(".memory-meta").append(...metaLine(memory));
  const link = item.querySelector(".memory-link");
  if (memory.superseded_by) {
    const newer = viewer.resolved.get(memory.superseded_by);
    if (newer) {
      const anchor = document.createElement("a");
      anchor.href = "#memory-" + newer.id;
      anchor.textContent = newer.memory;
      link.append("replaced by ", anchor);
    } else if (newer === null) {
      link.textContent = "replaced by a memory since deleted";
    } else {
      link.remove();
    }
  } else {
    link.remove();
  }
  const actions = item.querySelector(".memory-actions");
  const edit = button("Edit", "edit", () => openEditor(memory, item));
  edit.setAttribute("aria-label", "Edit memory: " + memory.memory);
  const pin = button(memory.pinned ? "Unpin" : "Pin", "pin", () => setPinned(memory, !memory.pinned));
  pin.setAttribute("aria-pressed", String(Boolean(memory.pinned)));
  pin.setAttribute("aria-label", (memory.pinned ? "Unpin" : "Pin") + " memory: " + memory.memory);
  const history = button("History", "history", () => toggleHistory(memory, item));
  history.setAttribute("aria-expanded", String(viewer.openHistory.has(memory.id)));
  history.setAttribute("aria-label", "History of memory: " + memory.memory);
  const remove = button("Delete", "delete", () => deleteMemory(memory), "delete-one danger");
  remove.setAttribute("aria-label", "Delete memory: " + memory.memory);
  for (const made of [edit, pin, history]) made.className = made.dataset.role + "-one secondary";
  actions.append(edit, pin, history, remove);
  if (viewer.openHistory.has(memory.id)) showHistory(memory, item);
  return item;
}

function metaLine(memory) {
  const parts = memory.memory_type === "conversation"
    ? [(memory.role || "said") + " " + shortTime(memory.message_time || memory.time)]
    : ["learnt " + shortTime(memory.created_at)];
  if (memory.event_time) parts.push("happened " + shortTime(memory.event_time));
  if (shortTime(memory.updated_at) !== shortTime(memory.created_at)) parts.push("updated " + shortTime(memory.updated_at));
  if (typeof memory.score === "number" && viewer.search && viewer.search.query) parts.push("score " + memory.score.toFixed(2));
  const metadata = Object.entries(memory.metadata || {}).map(([key, value]) => key + "=" + JSON.stringify(value));
  if (metadata.length) parts.push(metadata.join(", "));
  const out = [parts.join(" · ") + " "];
  const status = document.createElement("span");
  status.className = "status";
  status.textContent = memory.status;
  out.push(status);
  if (memory.pinned) {
    const pinned = document.createElement("span");
    pinned.className = "status pinned";
    pinned.textContent = "pinned";
    out.push(" ", pinned);
  }
  return out;
}

// ---- changing -----------------------------------------------------------------------------

function changed() {  // after a change made here: the user surely exists now, redraw at once
  state.unknownUser = false;
  state.shownJson = "";
  refreshMemories(true);
}

async function deleteMemory(memory) {
  try {
    await api("DELETE", "/v1/memories/" + encodeURIComponent(memory.id));
    setOperationStatus("Deleted: " + memory.memory);
  } catch (error) {
    setOperationStatus("Could not delete: " + explain(error), true);
  }
  changed();
}

async function setPinned(memory, pinned) {
  try {
    await api(pinned ? "POST" : "DELETE", "/v1/memories/" + encodeURIComponent(memory.id) + "/pin");
    setOperationStatus((pinned ? "Pinned: " : "Unpinned: ") + memory.memory);
  } catch (error) {
    setOperationStatus("Could not " + (pinned ? "pin" : "unpin") + ": " + explain(error), true);
  }
  changed();
}

function openEditor(memory, item) {
  viewer.editing = memory.id;
  const form = $("edit-template").content.firstElementChild.cloneNode(true);
  const text = form.querySelector(".edit-text");
  const metadata = form.querySelector(".edit-metadata");
  text.id = "edit-text-" + memory.id;
  metadata.id = "edit-metadata-" + memory.id;
  form.querySelector(".edit-text-label").htmlFor = text.id;
  form.querySelector(".edit-metadata-label").htmlFor = metadata.id;
  text.value = memory.memory;
  metadata.value = JSON.stringify(memory.metadata || {}, null, 1);
  const close = async () => {  // back to the list, the focus back on this memory's Edit button
    viewer.editing = null;
    form.remove();
    state.shownJson = "";
    await refreshMemories(true);
    const again = $("memory-" + memory.id);
    if (again) again.querySelector('[data-role="edit"]').focus();
  };
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const error = form.querySelector(".edit-error");
    let given;
    try {
      given = JSON.parse(metadata.value.trim() || "{}");
      if (given === null || typeof given !== "object" || Array.isArray(given)) throw new Error("not an object");
    } catch (_) {
      error.textContent = 'Metadata must be a JSON object, e.g. {"source": "crm"}';
      metadata.focus();
      return;
    }
    // PATCH sets the keys given; a key set to null is removed: so a key taken out here is sent as null
    const patch = { ...given };
    for (const key of Object.keys(memory.metadata || {})) if (!(key in given)) patch[key] = null;
    const body = { metadata: patch };
    if (text.value.trim() !== memory.memory) body.text = text.value.trim();
    try {
      await api("PATCH", "/v1/memories/" + encodeURIComponent(memory.id), body);
      setOperationStatus("Saved: " + (body.text || memory.memory));
      close();
    } catch (failure) {
      error.textContent = "Could not save: " + explain(failure);
    }
  });
  form.querySelector(".edit-cancel").addEventListener("click", close);
  form.addEventListener("keydown", (event) => { if (event.key === "Escape") close(); });
  item.querySelector(".memory-more").prepend(form);
  text.focus();
}

function toggleHistory(memory, item) {
  if (viewer.openHistory.has(memory.id)) {
    viewer.openHistory.delete(memory.id);
    item.querySelector(".history").remove();
    item.querySelector('[data-role="history"]').setAttribute("aria-expanded", "false");
  } else {
    viewer.openHistory.add(memory.id);
    item.querySelector('[data-role="history"]').setAttribute("aria-expanded", "true");
    showHistory(memory, item);
  }
}

async function showHistory(memory, item) {
  const list = document.createElement("ol");
  list.className = "history";
  list.setAttribute("aria-label", "History of " + memory.memory);
  item.querySelector(".memory-more").append(list);
  let changes;
  try {
    changes = (await api("GET", "/v1/memories/" + encodeURIComponent(memory.id) + "/history")).changes;
  } catch (error) {
    list.textContent = "Could not read the history: " + explain(error);
    return;
  }
  for (const change of changes) {
    const row = document.createElement("li");
    row.className = "change";
    row.dataset.action = change.action;
    const before = change.before && change.before.content;
    const after = change.after && change.after.content;
    const what = before && after && before !== after ? ": “" + before + "” → “" + after + "”" : "";
    row.append(shortTime(change.at) + " " + change.action + (change.operation ? " by " + change.operation : "") + what + " ");
    if (change.run_id) {
      const undo = button("Undo this run", "undo", () => undoRun(change.run_id, memory));
      undo.className = "undo-run secondary";
      undo.dataset.run = change.run_id;
      undo.setAttribute("aria-label", "Undo the run that " + change.action + " this memory at " + shortTime(change.at));
      row.append(undo);
    }
    list.append(row);
  }
}

async function undoRun(runId, memory) {
  try {
    const outcome = await api("POST", "/v1/runs/" + encodeURIComponent(runId) + "/undo");
    const said = outcome.already_undone ? "already undone"
      : outcome.restored.length + " put back, " + outcome.deleted.length + " deleted"
        + (Object.keys(outcome.refused).length ? ", " + Object.keys(outcome.refused).length + " left (changed since)" : "");
    setOperationStatus("Undid run " + runId + ": " + said);
  } catch (error) {
    setOperationStatus("Could not undo: " + explain(error), true);
  }
  viewer.openHistory.add(memory.id);
  changed();
}

// ---- search -------------------------------------------------------------------------------

function drawTypeFilter() {
  const holder = $("type-filter-options");
  holder.replaceChildren();
  for (const [type, label] of GROUPS) {
    const wrap = document.createElement("label");
    wrap.className = "check";
    const box = document.createElement("input");
    box.type = "checkbox";
    box.value = type;
    box.name = "types";
    wrap.append(box, " " + label);
    holder.append(wrap);
  }
}

function readSearchForm() {
  const query = $("search-query").value.trim();
  const types = [...document.querySelectorAll("#type-filter-options input:checked")].map((box) => box.value);
  const since = $("search-since").value;
  const until = $("search-until").value;
  const text = $("search-metadata").value.trim();
  let filters = null;
  if (text) {
    filters = JSON.parse(text);  // the caller shows the error
    if (filters === null || typeof filters !== "object" || Array.isArray(filters)) throw new SyntaxError("not an object");
  }
  if (!query && !types.length && !since && !until && !filters) return null;
  return { query, types, since, until, filters };
}

function startSearch(event) {
  event.preventDefault();
  try {
    viewer.search = readSearchForm();
  } catch (_) {
    $("search-summary").textContent = 'Metadata must be a JSON object, e.g. {"source": "crm"}';
    $("search-metadata").focus();
    return;
  }
  viewer.offsets.clear();
  $("search-summary").textContent = viewer.search ? describeSearch(viewer.search) : "";
  changedView();
}

function describeSearch(search) {
  const parts = [];
  if (search.query) parts.push("matching “" + search.query + "”");
  if (search.types.length) parts.push("of type " + search.types.map(typeLabel).join(", "));
  if (search.since) parts.push("from " + search.since.replace("T", " "));
  if (search.until) parts.push("until " + search.until.replace("T", " "));
  if (search.filters) parts.push("with " + JSON.stringify(search.filters));
  return "Showing memories " + parts.join(", ") + ".";
}

function clearSearch() {
  $("search-form").reset();
  viewer.search = null;
  viewer.offsets.clear();
  $("search-summary").textContent = "";
  changedView();
  $("search-query").focus();
}

function changedView() {
  state.shownJson = "";
  refreshMemories(true);
}

function resetViewer() {
  viewer.offsets.clear();
  viewer.resolved.clear();
  viewer.openHistory.clear();
  viewer.editing = null;
}

function startViewer() {
  $("search-form").addEventListener("submit", startSearch);
  $("search-clear").addEventListener("click", clearSearch);
  $("show-expired").addEventListener("change", changedView);
}
