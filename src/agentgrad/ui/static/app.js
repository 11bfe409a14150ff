// agentgrad dashboard: the live parts of the server-rendered pages. No framework, no network beyond this service.
"use strict";

const CSRF = { "X-Agentgrad-CSRF": "1" };

function flash(message) {
  const box = document.getElementById("flash");
  box.textContent = message;
  box.hidden = !message;
}

async function api(path, options = {}) {
  const init = { credentials: "same-origin", headers: { Accept: "application/json" }, ...options };
  if (init.method && init.method !== "GET") {
    init.headers = { ...init.headers, ...CSRF, "Content-Type": "application/json" };
  }
  const response = await fetch(path, init);
  const body = await response.json();
  if (!response.ok) {
    const message = body && body.error ? body.error.message : response.statusText;
    throw new Error(message);
  }
  return body;
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child);
  return node;
}

function fmt(value, digits = 0) {
  return value === null || value === undefined ? "–" : Number(value).toFixed(digits);
}

// -- reward chart ---------------------------------------------------------------------------------------------
function drawRewards(svg, rewards) {
  const ns = "http://www.w3.org/2000/svg";
  svg.replaceChildren();
  const series = [["val", rewards.validation || []], ["held", rewards.held_out || []]];
  const points = series.flatMap(([, s]) => s);
  const span = Math.max(1e-9, ...points.map((p) => p.t));
  const x = (t) => 30 + (360 * t) / span;
  const y = (r) => 140 - 120 * Math.max(0, Math.min(1, r));
  const axis = document.createElementNS(ns, "path");
  axis.setAttribute("d", "M30 20 V140 H390");
  axis.setAttribute("class", "axis");
  svg.append(axis);
  for (const [name, items] of series) {
    if (!items.length) continue;
    const line = document.createElementNS(ns, "polyline");
    line.setAttribute("points", items.map((p) => `${x(p.t).toFixed(1)},${y(p.reward).toFixed(1)}`).join(" "));
    line.setAttribute("class", `series ${name}`);
    svg.append(line);
    for (const p of items) {
      const dot = document.createElementNS(ns, "circle");
      dot.setAttribute("cx", x(p.t).toFixed(1));
      dot.setAttribute("cy", y(p.reward).toFixed(1));
      dot.setAttribute("r", "3");
      dot.setAttribute("class", `dot ${name}`);
      const title = document.createElementNS(ns, "title");
      title.textContent = `v${p.version}: ${p.reward.toFixed(3)}`;
      dot.append(title);
      svg.append(dot);
    }
  }
  svg.dataset.points = String(points.length);
}

// -- the why panel --------------------------------------------------------------------------------------------
function diffBlock(text) {
  const pre = el("pre", { class: "diff" });
  for (const line of text.split("\n")) {
    if (!line) continue;
    let cls = "";
    if (line.startsWith("+++") || line.startsWith("---")) cls = "file";
    else if (line.startsWith("+")) cls = "add";
    else if (line.startsWith("-")) cls = "del";
    else if (line.startsWith("@@")) cls = "hunk";
    pre.append(el("span", { class: cls }, line), "\n");
  }
  return pre;
}

async function showWhy(job, diffId) {
  const panel = document.getElementById("why");
  panel.replaceChildren(el("p", { class: "hint" }, `loading ${diffId}…`));
  try {
    const [view, why] = await Promise.all([
      api(`/api/runs/${job}/diffs/${encodeURIComponent(diffId)}`),
      api(`/api/runs/${job}/why/${encodeURIComponent(diffId)}`),
    ]);
    const ev = why.evidence;
    const rows = [
      el("h3", { id: "why-diff" }, `${diffId} on ${why.diff.artifact}`),
      el("p", {}, `made against v${why.diff.base} by ${why.diff.author || "?"}` +
        (why.version !== null ? ` · committed as v${why.version}` : " · not committed")),
    ];
    if (why.diff.rationale) rows.push(el("p", { class: "rationale" }, why.diff.rationale));
    rows.push(view.unified ? diffBlock(view.unified) : el("p", { class: "hint" }, view.note || "no change"));
    rows.push(el("p", { id: "why-evidence" }, `evidence: ${ev.tasks} tasks · ${ev.wins} wins, ${ev.losses} losses` +
      ` · mean delta ${ev.mean_delta === null ? "–" : Number(ev.mean_delta).toFixed(3)}`));
    const list = el("ol", { id: "why-decisions" });
    for (const d of why.decisions) {
      const numbers = Object.entries(d.numbers || {}).map(([k, v]) => `${k}=${typeof v === "number" ? +v.toPrecision(4) : v}`);
      list.append(el("li", {}, el("span", { class: `outcome ${d.outcome}` }, d.outcome), ` [${d.stage}] ${d.reason}`,
        numbers.length ? el("div", { class: "numbers" }, numbers.join(", ")) : ""));
    }
    rows.push(list);
    panel.replaceChildren(...rows);
  } catch (error) {
    panel.replaceChildren(el("p", { class: "bad" }, String(error.message || error)));
  }
}

// -- the run page ---------------------------------------------------------------------------------------------
function renderUsage(usage) {
  const t = usage.throughput;
  document.getElementById("rate").textContent = fmt(t.run_calls_per_s, 1);
  document.getElementById("rate-limit").textContent = fmt(t.limit_per_s, 1);
  document.getElementById("slots").textContent = fmt(t.slots);
  const share = t.limit_per_s ? Math.min(100, (100 * t.run_calls_per_s) / t.limit_per_s) : 0;
  document.getElementById("rate-bar").style.width = `${share.toFixed(0)}%`;
  const body = document.querySelector("#stages tbody");
  body.replaceChildren(...Object.entries(usage.stages).map(([stage, s]) =>
    el("tr", { "data-stage": stage }, el("td", {}, stage), el("td", { class: "in-flight" }, String(s.in_flight)),
      el("td", {}, String(s.done)), el("td", {}, String(s.errors)))));
  const budgets = document.getElementById("budgets");
  budgets.replaceChildren(...Object.entries(usage.budget).filter(([, b]) => b.limit !== null || b.used).map(([k, b]) => {
    const share = b.limit ? Math.min(100, (100 * b.used) / b.limit) : 0;
    return el("div", { class: "budget", "data-kind": k }, el("span", {}, `${k} ${fmt(b.used, k === "wall_time" || k === "cost" ? 2 : 0)} / ${fmt(b.limit)}`),
      el("div", { class: "bar" }, el("div", { style: `width:${share.toFixed(0)}%` })));
  }));
}

function renderJob(job) {
  const state = document.getElementById("state");
  state.textContent = job.state;
  state.className = `state ${job.state}`;
  document.getElementById("restarts").textContent = String(job.restarts);
  const error = document.getElementById("job-error");
  error.textContent = job.error || "";
  error.hidden = !job.error;
  const active = job.state === "running" || job.state === "cancelling";
  document.getElementById("cancel").disabled = job.state !== "running";
  document.getElementById("resume").disabled = active || job.state === "finished";
}

function addDecision(job, payload, seq) {
  const list = document.getElementById("decisions");
  const item = el("li", { "data-seq": String(seq), "data-diff": payload.diff_id, class: "decision", tabindex: "0" },
    el("span", { class: "diff-id" }, payload.diff_id), " ",
    el("span", { class: `outcome ${payload.outcome}` }, payload.outcome), ` [${payload.stage}] ${payload.reason}`);
  item.addEventListener("click", () => showWhy(job, payload.diff_id));
  list.prepend(item);
  document.getElementById("decision-count").textContent = String(list.children.length);
}

function openStream(job, refresh) {
  const kinds = ["decision", "commit", "resumed", "finished", "failed"].map((k) => `kind=${k}`).join("&");
  const source = new EventSource(`/api/runs/${job}/events?${kinds}`);
  source.addEventListener("decision", (e) => addDecision(job, JSON.parse(e.data).payload, e.lastEventId));
  for (const kind of ["commit", "finished", "resumed", "failed"]) {
    source.addEventListener(kind, (e) => { document.getElementById("seq").textContent = e.lastEventId; refresh(); });
  }
  source.addEventListener("end", () => { source.close(); refresh(); });
  return source;
}

function renderArtifacts(job, artifacts) {
  const list = document.getElementById("artifacts");
  list.replaceChildren(...artifacts.items.map((a) => el("li", {},
    el("a", { href: `/runs/${job}/artifact?artifact=${encodeURIComponent(a.id)}` }, a.id),
    ` dev v${a.dev} · stable v${a.stable}`)));
}

function renderFrontier(job, frontier) {
  const rows = frontier.items.map((entry) => el("tr", {},
    el("td", {}, entry.task_id),
    el("td", {}, ...entry.diff_ids.flatMap((id, i) => {
      const link = el("a", { href: "#why-card", class: "diff-id" }, id);
      link.addEventListener("click", () => showWhy(job, id));
      return i ? [", ", link] : [link];
    })),
    el("td", {}, String(entry.wins))));
  document.querySelector("#frontier tbody").replaceChildren(...rows);
  document.getElementById("frontier-count").textContent = String(rows.length);
}

async function refreshRun(job, frontier = false) {
  const [run, usage, rewards, artifacts, found] = await Promise.all([
    api(`/api/runs/${job}`), api(`/api/runs/${job}/usage`).catch(() => null),
    api(`/api/runs/${job}/rewards`).catch(() => null), api(`/api/runs/${job}/artifacts`).catch(() => null),
    frontier ? api(`/api/runs/${job}/frontier`).catch(() => null) : null]);  // on events only: it reads evidence
  renderJob(run.job);
  if (found) renderFrontier(job, found);
  if (artifacts) renderArtifacts(job, artifacts);
  if (usage) { renderUsage(usage); document.getElementById("seq").textContent = String(usage.seq); }
  if (rewards) drawRewards(document.getElementById("rewards"), rewards);
  return run.job;
}

function initRun() {
  const job = document.body.dataset.job;
  let source = null;
  let timer = null;
  const refresh = () => refreshRun(job, true).catch((error) => flash(String(error.message || error)));
  const watch = () => {
    if (source) source.close();
    source = openStream(job, refresh);
    if (!timer) timer = setInterval(async () => {
      const current = await refreshRun(job).catch(() => null);
      if (current && !["running", "cancelling"].includes(current.state)) { clearInterval(timer); timer = null; }
    }, 1000);
  };
  const act = (name) => async () => {
    const result = document.getElementById("action-result");
    try {
      const body = await api(`/api/runs/${job}/${name}`, { method: "POST", body: "{}" });
      result.textContent = name === "promote" ? `promoted ${JSON.stringify(body.promoted)}` : `${name}: ${body.state}`;
      if (name === "resume") {
        document.getElementById("decisions").replaceChildren();
        watch();
      }
      refresh();
    } catch (error) {
      result.textContent = `${name} failed: ${error.message || error}`;
    }
  };
  for (const name of ["cancel", "resume", "promote"]) document.getElementById(name).addEventListener("click", act(name));
  refresh();
  watch();
}

// -- the other pages ------------------------------------------------------------------------------------------
function initRuns() {
  document.getElementById("start-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const form = event.target;
    try {
      const job = await api("/api/runs", { method: "POST", body: JSON.stringify({
        name: form.name.value, format: form.format.value, config: form.config.value }) });
      window.location.assign(`/runs/${job.id}`);
    } catch (error) {
      flash(`the run did not start: ${error.message || error}`);
    }
  });
  const button = document.getElementById("compare");
  if (!button) return;
  const picked = () => [...document.querySelectorAll("input.pick:checked")].map((box) => box.value);
  document.querySelectorAll("input.pick").forEach((box) => box.addEventListener("change", () => {
    button.disabled = picked().length !== 2;
  }));
  button.addEventListener("click", () => {
    const [a, b] = picked();
    window.location.assign(`/compare?a=${a}&b=${b}`);
  });
}

function initArtifact() {
  const job = document.body.dataset.job;
  document.querySelectorAll(".why-link").forEach((button) =>
    button.addEventListener("click", () => showWhy(job, button.dataset.diff)));
}

function initCompare() {
  document.querySelectorAll("svg.reward-chart").forEach((svg) => drawRewards(svg, JSON.parse(svg.dataset.rewards)));
}

document.addEventListener("DOMContentLoaded", () => {
  const init = { run: initRun, runs: initRuns, artifact: initArtifact, compare: initCompare }[document.body.dataset.page];
  if (init) init();
});
