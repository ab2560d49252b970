// MemoryScope playground: the view of the memory policy the server keeps (GET /v1/operations says
// which), an agent's steps per turn, and the dashboard (sampled by this page from /metrics, the
// user's status and each reply), drawn as inline SVG: no build step, nothing from another site.
"use strict";

// SVG's namespace, from an <svg> the HTML parser made (index.html's template): no address in this file
const SVG = document.getElementById("svg-template").content.firstElementChild.namespaceURI;
const SAMPLE_MS = 5000;        // how often the open dashboard samples /metrics
const SAMPLES_KEPT = 120;      // the newest samples each chart keeps (10 minutes)
const TURNS_KEPT = 50;         // the newest turns the per-turn charts keep
const COLORS = ["#2456c7", "#c7562a", "#2a9d5c", "#9c4ac7", "#c79a24", "#2a8fc7", "#c72a6f", "#6b7280"];

const views = {
  tiersJson: "",               // the tiers last drawn (MemoryOS), to redraw only on a change
  samples: [],                 // [{at, memories: {type: count}, runs, errors}] from /metrics
  turns: [],                   // [{tokens, calls, retrieveMs}] per reply of this page
  lastCalls: null,             // model calls counted by /metrics before the turn
  metricsRefused: "",          // why /metrics cannot be read (a non-admin key), once known
  runs: [],                    // the user's newest runs (status)
  timer: null,
};

function svg(name, attributes, ...children) {
  const made = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes || {})) made.setAttribute(key, String(value));
  made.append(...children);
  return made;
}

function element(name, className, text) {
  const made = document.createElement(name);
  if (className) made.className = className;
  if (text !== undefined) made.textContent = text;
  return made;
}

// ---- the policy view ----------------------------------------------------------------------

window.startPolicyView = async function startPolicyView() {
  document.body.dataset.policy = state.policy;
  if (state.policy === "agent") $("last-reply").open = true;  // the agent's steps are the point of its view
  $("dashboard-details").addEventListener("toggle", () => {
    if ($("dashboard-details").open) startSampling();
    else stopSampling();
  });
};

// Under MemoryOS, the tiers as MemoryOS shows them; under an agent, its core memory blocks.
window.refreshPolicyView = async function refreshPolicyView() {
  const holder = $("policy-view");
  if (state.policy === "agent" && state.user) return refreshBlocks(holder);
  if (state.policy !== "memoryos" || !state.user || state.unknownUser) {
    if (holder.childElementCount) holder.replaceChildren();
    views.tiersJson = "";
    return;
  }
  let tiers;
  try {
    tiers = await api("GET", userPath("/tiers"));
  } catch (error) {
    if (error instanceof ApiError && error.code === "unknown_user") return holder.replaceChildren();
    return notify("Could not read the tiers: " + explain(error), true);
  }
  const json = JSON.stringify(tiers);
  if (json === views.tiersJson) return;
  views.tiersJson = json;
  drawTiers(holder, tiers);
};

function drawTiers(holder, tiers) {
  holder.replaceChildren();
  const long = tierSection("long", "Long-term memory");
  long.append(element("h4", "", typeLabel("memoryos_profile")));
  long.append(element("p", tiers.profile ? "profile" : "empty", tiers.profile ? tiers.profile.memory : "none yet"));
  long.append(element("h4", "", typeLabel("memoryos_knowledge") + " (" + tiers.knowledge.length + ")"));
  long.append(textList(tiers.knowledge, "knowledge"));
  const mid = tierSection("mid", "Mid-term memory");
  mid.append(element("h4", "", typeLabel("memoryos_segment") + " (" + tiers.mid_term.length + ")"));
  if (tiers.heat_threshold !== null) {
    mid.append(element("p", "subtle", "A segment as hot as " + tiers.heat_threshold + " is promoted to long-term memory (the line)."));
  }
  const top = Math.max(tiers.heat_threshold || 0, ...tiers.mid_term.map((segment) => segment.heat), 1) * 1.2;
  const segments = element("ul", "memory-list segments");
  for (const segment of tiers.mid_term) segments.append(segmentItem(segment, top, tiers.heat_threshold));
  if (!tiers.mid_term.length) mid.append(element("p", "empty", "none yet"));
  else mid.append(segments);
  const short = tierSection("short", "Short-term memory");
  short.append(element("h4", "", typeLabel("memoryos_page") + " (" + tiers.short_term.length + ", oldest first)"));
  short.append(textList(tiers.short_term, "page"));
  holder.append(long, mid, short);
}

function tierSection(tier, title) {
  const section = element("section", "tier");
  section.id = "tier-" + tier;
  section.dataset.tier = tier;
  section.append(element("h3", "", title));
  return section;
}

function textList(records, className) {
  if (!records.length) return element("p", "empty", "none yet");
  const list = element("ol", "tier-list " + className);
  for (const record of records) {
    const item = element("li", className, record.memory);
    item.dataset.id = record.id;
    list.append(item);
  }
  return list;
}

function segmentItem(segment, top, threshold) {
  const item = element("li", "memory segment");
  item.dataset.id = segment.id;
  item.dataset.heat = String(segment.heat);
  const text = element("p", "memory-text", segment.memory);
  const row = element("div", "heat");
  const width = 100;
  const bar = svg("svg", { viewBox: `0 0 ${width} 10`, preserveAspectRatio: "none", role: "img",
    "aria-label": "heat " + segment.heat.toFixed(2) + (threshold !== null ? " of " + threshold : "") });
  bar.append(svg("rect", { class: "heat-track", x: 0, y: 0, width, height: 10 }));
  const hot = segment.due_for_promotion;  // the server says when a segment is hot enough
  bar.append(svg("rect", { class: "heat-bar" + (hot ? " hot" : ""), x: 0, y: 0, width: (width * segment.heat) / top, height: 10 }));
  if (threshold !== null) {
    const x = (width * threshold) / top;
    bar.append(svg("line", { class: "threshold", x1: x, x2: x, y1: 0, y2: 10 }));
  }
  const plural = (count, word) => count + " " + word + (count === 1 ? "" : "s");
  row.append(element("span", "subtle", plural(segment.visits, "visit") + " · " + plural(segment.pages.length, "page")), bar,
    element("span", "heat-value", segment.heat.toFixed(2)));
  item.append(text, row);
  return item;
}

// ---- an agent's core memory blocks ---------------------------------------------------------

async function refreshBlocks(holder) {
  if (holder.querySelector(".block.dirty")) return;  // never under the user's typing
  let found;
  try {
    found = await api("GET", userPath("/blocks"));
  } catch (error) {
    return notify("Could not read the core memory blocks: " + explain(error), true);
  }
  const json = JSON.stringify(found.blocks);
  if (json === views.tiersJson) return;
  views.tiersJson = json;
  const focused = document.activeElement && document.activeElement.closest && document.activeElement.closest(".block");
  const refocus = focused ? focused.dataset.name : null;
  holder.replaceChildren();
  const section = tierSection("core", "Core memory");
  for (const block of found.blocks) section.append(blockForm(block));
  holder.append(section);
  if (refocus && holder.querySelector(`.block[data-name="${refocus}"] textarea`)) holder.querySelector(`.block[data-name="${refocus}"] textarea`).focus();
}

function blockForm(block) {
  const form = element("form", "block");
  form.dataset.name = block.name;
  const id = "block-" + block.name;
  const label = element("label", "", block.name + " ");
  label.htmlFor = id;
  const size = element("span", "subtle block-size", block.size + " / " + block.limit + " characters");
  label.append(size);
  const text = element("textarea");
  text.id = id;
  text.rows = 3;
  text.value = block.value;
  text.maxLength = block.limit;  // the agent's limit: the page cannot go past it; the server checks it again
  const error = element("p", "error block-error");
  error.setAttribute("role", "alert");
  const save = element("button", "", "Save " + block.name);
  save.type = "submit";
  text.addEventListener("input", () => {
    form.classList.add("dirty");
    size.textContent = text.value.length + " / " + block.limit + " characters";
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const saved = await api("PUT", userPath("/blocks/" + encodeURIComponent(block.name)), { value: text.value });
      form.classList.remove("dirty");
      error.textContent = "";
      setOperationStatus("Saved core memory block " + saved.name + " (" + saved.size + "/" + saved.limit + ")");
      views.tiersJson = "";
      refreshBlocks($("policy-view"));
    } catch (failure) {
      error.textContent = "Not saved: " + explain(failure);
    }
  });
  form.append(label, text, error, save);
  return form;
}

// ---- an agent's turn ----------------------------------------------------------------------

// After each reply: an agent's steps (inner monologue, calls and results), and the turn's figures.
window.afterTurn = function afterTurn(extension, usage) {
  drawSteps((extension && extension.steps) || null, (extension && extension.notices) || []);
  drawGauge((extension && extension.context_window) || null);
  noteTurn(extension, usage);
};

// The agent's context window after the turn: tokens in use of the limit, the warning and flush marks.
function drawGauge(window_) {
  const holder = $("context-gauge");
  holder.replaceChildren();
  holder.hidden = !window_;
  if (!window_) return;
  const { tokens, limit, warning_fraction: warning, flush_fraction: flush } = window_;
  const used = tokens / limit;
  const width = 100;
  const gauge = svg("svg", { viewBox: `0 0 ${width} 12`, preserveAspectRatio: "none", role: "img",
    "aria-label": tokens + " of " + limit + " tokens; warned at " + Math.round(warning * 100) + "%, flushed at " + Math.round(flush * 100) + "%" });
  gauge.append(svg("rect", { class: "heat-track", x: 0, y: 0, width, height: 12 }));
  const level = used >= flush ? " hot" : used >= warning ? " warm" : "";
  gauge.append(svg("rect", { class: "heat-bar gauge-used" + level, x: 0, y: 0, width: Math.min(width, width * used), height: 12 }));
  for (const [name, fraction] of [["warning", warning], ["flush", flush]]) {
    const x = Math.min(width - 0.75, width * fraction);
    gauge.append(svg("line", { class: "threshold mark-" + name, x1: x, x2: x, y1: 0, y2: 12 }));
  }
  holder.append(element("h3", "", "Context window"), gauge,
    element("p", "subtle gauge-text", tokens + " / " + limit + " tokens (" + Math.round(used * 100) + "%) · warning at "
      + Math.round(warning * 100) + "% · flush at " + Math.round(flush * 100) + "%"));
}

function drawSteps(steps, notices) {
  const holder = $("agent-steps");
  holder.hidden = !steps;
  const list = $("steps");
  list.replaceChildren();
  if (!steps) return;
  for (const notice of notices) list.append(element("li", "notice", "⚠ " + notice));
  steps.forEach((step, index) => {
    const item = element("li", "step");
    item.append(element("span", "step-number", "Step " + (index + 1) + " "));
    if (step.thought) item.append(element("span", "monologue", step.thought));
    const calls = element("ul", "calls");
    for (const call of step.calls || []) {
      const line = element("li", "call" + (call.ok ? "" : " error"));
      line.append(element("code", "", call.name + "(" + call.arguments + ")"), " → ", element("span", "result", call.result));
      calls.append(line);
    }
    if (calls.childElementCount) item.append(calls);
    if (step.heartbeat) item.append(element("p", "heartbeat subtle", "↻ heartbeat: the agent asked for another step"));
    list.append(item);
  });
}

// ---- the dashboard ------------------------------------------------------------------------

function startSampling() {
  if (views.timer === null) views.timer = setInterval(sample, SAMPLE_MS);
  sample();
}

function stopSampling() {
  clearInterval(views.timer);
  views.timer = null;
}

// The Prometheus text as {name: [{labels, value}]} (comments skipped).
function parseMetrics(text) {
  const out = {};
  for (const line of text.split("\n")) {
    const match = /^([a-zA-Z_:][\w:]*)(\{(.*)\})?\s+(\S+)$/.exec(line);
    if (!match) continue;
    const labels = {};
    for (const pair of (match[3] || "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[pair[1]] = pair[2];
    (out[match[1]] = out[match[1]] || []).push({ labels, value: Number(match[4]) });
  }
  return out;
}

function total(metrics, name, where) {
  return (metrics[name] || []).filter((row) => !where || where(row.labels)).reduce((sum, row) => sum + row.value, 0);
}

async function readMetrics() {
  const response = await fetch("/metrics", { headers: headers(false) });
  if (response.status === 403 || response.status === 401) {
    views.metricsRefused = "The dashboard's server figures need an admin API key.";
    return null;
  }
  if (!response.ok) throw new ApiError(response.status, "http_" + response.status, response.statusText);
  views.metricsRefused = "";
  return parseMetrics(await response.text());
}

async function sample() {
  if (document.visibilityState !== "visible") return;
  try {
    const metrics = await readMetrics();
    if (metrics) {
      const memories = {};
      for (const row of metrics.memoryscope_memories || []) {
        if (row.labels.status !== "valid") continue;
        memories[row.labels.type] = (memories[row.labels.type] || 0) + row.value;
      }
      views.samples.push({
        at: Date.now(), memories,
        runs: total(metrics, "memoryscope_backend_runs_total"), errors: total(metrics, "memoryscope_backend_errors_total"),
      });
      views.samples = views.samples.slice(-SAMPLES_KEPT);
    }
  } catch (error) {
    views.metricsRefused = "Could not read /metrics: " + explain(error);
  }
  drawDashboard();
}

async function noteTurn(extension, usage) {
  const timings = (extension && extension.timings) || {};
  const retrieve = Object.entries(timings).find(([step]) => step.startsWith("retrieve") || step.startsWith("memoryos_retrieve"));
  const turn = { tokens: usage ? usage.total_tokens : null, calls: null, retrieveMs: retrieve ? retrieve[1] * 1000 : null };
  try {
    // /metrics reads the whole store: only while the dashboard is open (its calls count from then)
    const metrics = $("dashboard-details").open ? await readMetrics() : null;
    if (metrics) {
      const calls = total(metrics, "memoryscope_model_calls_total", (labels) => labels.model === "generation_model");
      if (views.lastCalls !== null) turn.calls = calls - views.lastCalls;
      views.lastCalls = calls;
    }
  } catch (_) {
    // the turn is still counted, without its calls
  }
  views.turns = views.turns.concat([turn]).slice(-TURNS_KEPT);
  if ($("dashboard-details").open) drawDashboard();
}

window.noteStatus = function noteStatus(status) {
  views.runs = status.stored_runs || [];
};

function quantile(values, q) {
  if (!values.length) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

function drawDashboard() {
  const holder = $("dashboard");
  holder.replaceChildren();
  if (views.metricsRefused) holder.append(element("p", "subtle", views.metricsRefused));
  const charts = element("div", "charts");
  const types = [...new Set(views.samples.flatMap((sample) => Object.keys(sample.memories)))];
  charts.append(chart("memories-chart", "Memories per type (valid, all users)", types.map((type) => ({
    name: typeLabel(type), points: views.samples.map((sample) => sample.memories[type] || 0),
  }))));
  charts.append(chart("turns-chart", "LLM calls and tokens per turn (this page's turns)", [
    { name: "tokens", points: views.turns.map((turn) => turn.tokens || 0) },
    { name: "generation calls since the turn before", points: views.turns.map((turn) => turn.calls || 0), axis: "right" },
  ]));
  const retrieves = views.turns.map((turn) => turn.retrieveMs).filter((ms) => ms !== null);
  const p50 = quantile(retrieves, 0.5);
  const p95 = quantile(retrieves, 0.95);
  const latency = chart("retrieve-chart", "Retrieval per turn, ms", [{ name: "retrieve", points: retrieves }]);
  latency.append(element("p", "percentiles", p50 === null ? "No reply yet."
    : "p50 " + p50.toFixed(1) + " ms · p95 " + p95.toFixed(1) + " ms over " + retrieves.length + " turns"));
  charts.append(latency);
  const last = views.samples[views.samples.length - 1];
  const runs = element("figure", "chart runs");
  runs.id = "runs-chart";
  runs.append(element("figcaption", "", "Background runs"));
  runs.append(element("p", "run-counts", last ? last.runs + " finished, " + last.errors + " failed (all users)" : "No sample yet."));
  const list = element("ol", "run-list");
  for (const run of views.runs.slice(0, 8)) list.append(element("li", "", shortTime(run.at) + " " + run.operation));
  if (!views.runs.length) list.append(element("li", "empty", "no run changed " + state.user + "'s memories yet"));
  runs.append(list);
  charts.append(runs);
  holder.append(charts);
}

// A line chart of equally spaced points, one line per series (a right-hand series gets its own scale).
function chart(id, title, series) {
  const figure = element("figure", "chart");
  figure.id = id;
  figure.append(element("figcaption", "", title));
  const width = 300;
  const height = 120;
  const drawn = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": title });
  drawn.append(svg("rect", { class: "frame", x: 0, y: 0, width, height }));
  const scales = { left: 1, right: 1 };
  for (const line of series) {
    const side = line.axis === "right" ? "right" : "left";
    scales[side] = Math.max(scales[side], ...line.points);
  }
  const legend = element("p", "legend");
  series.forEach((line, index) => {
    const color = COLORS[index % COLORS.length];
    const scale = scales[line.axis === "right" ? "right" : "left"];
    const step = line.points.length > 1 ? width / (line.points.length - 1) : 0;
    const coords = line.points.map((value, at) => (at * step).toFixed(1) + "," + (height - 4 - ((height - 8) * value) / scale).toFixed(1));
    if (coords.length === 1) coords.push(width + "," + coords[0].split(",")[1]);
    if (coords.length) drawn.append(svg("polyline", { points: coords.join(" "), fill: "none", stroke: color, "stroke-width": 2, "data-series": line.name }));
    const key = element("span", "key");
    const swatch = element("span", "swatch");
    swatch.style.background = color;
    const lastValue = line.points.length ? line.points[line.points.length - 1] : 0;
    key.append(swatch, line.name + " " + (Number.isInteger(lastValue) ? lastValue : lastValue.toFixed(1)));
    legend.append(key);
  });
  figure.append(drawn, legend);
  return figure;
}
