// cellserver console: reads /api/v1/* and draws by hand in SVG.
"use strict";
const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";
const history = []; // {t, allowed, limited}: decisions/s, last HISTORY samples
const HISTORY = 300;

function fmt(n, d = 1) {
  if (n < 0) return "–";
  if (n >= 1e6) return (n / 1e6).toFixed(d) + "M";
  if (n >= 1e3) return (n / 1e3).toFixed(d) + "k";
  return Number.isInteger(n) ? String(n) : n.toFixed(d);
}
function bytes(n) {
  const u = ["B", "KiB", "MiB", "GiB", "TiB"]; let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return n.toFixed(i ? 1 : 0) + " " + u[i];
}
function ms(n) {
  if (n < 0) return n === -2 ? "gone" : "–";
  return n >= 1000 ? (n / 1000).toFixed(1) + " s" : n + " ms";
}
function us(n) { return n < 0 ? "–" : n >= 1000 ? "≤" + n / 1000 + " ms" : "≤" + n + " µs"; }
function el(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  return e;
}
function cell(tr, text, cls) { const td = tr.insertCell(); td.textContent = text; if (cls) td.className = cls; }
async function api(path, opts) {
  const r = await fetch(path, opts);
  const body = await r.json().catch(() => ({ error: r.statusText }));
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

// ---- tabs
for (const b of document.querySelectorAll("nav button")) {
  b.onclick = () => {
    for (const o of document.querySelectorAll("nav button")) o.classList.toggle("on", o === b);
    for (const v of document.querySelectorAll(".view")) v.hidden = v.id !== "view-" + b.dataset.view;
  };
}

// ---- live view
function drawChart() {
  const svg = $("chart"); svg.replaceChildren();
  const W = 800, H = 200, P = 24;
  let top = 1;
  for (const h of history) top = Math.max(top, h.allowed + h.limited);
  svg.append(el("text", { x: 4, y: 14, "font-size": 11, fill: "#666" }, fmt(top) + "/s"));
  svg.append(el("line", { x1: P, y1: H - P, x2: W, y2: H - P, stroke: "#ccc" }));
  if (history.length < 2) return;
  // The x axis spans the history kept so far, up to HISTORY seconds.
  const t1 = history[history.length - 1].t, t0 = Math.max(history[0].t, t1 - HISTORY * 1000);
  const x = (t) => P + (W - P) * Math.max(0, t - t0) / Math.max(1, t1 - t0);
  const y = (v) => H - P - (H - 2 * P) * v / top;
  const line = (f, color) => {
    const pts = history.map((h) => x(h.t).toFixed(1) + "," + y(f(h)).toFixed(1)).join(" ");
    svg.append(el("polyline", { points: pts, fill: "none", stroke: color, "stroke-width": 2 }));
  };
  line((h) => h.allowed, "#16a34a");
  line((h) => h.limited, "#dc2626");
  svg.append(el("text", { x: P, y: H - 6, "font-size": 11, fill: "#666" }, "-" + Math.round((t1 - t0) / 1000) + " s"));
  svg.append(el("text", { x: W - 30, y: H - 6, "font-size": 11, fill: "#666" }, "now"));
}

async function refresh() {
  try {
    const [o, top] = await Promise.all([api("/api/v1/overview"), api("/api/v1/top?count=10")]);
    const r = o.rates;
    $("status").textContent = "cellserver " + o.version + " · up " + o.uptime_s + " s · " + new Date(o.at_ms).toLocaleTimeString();
    if (r.window_s > 0) {
      $("dps").textContent = fmt(r.decisions_per_s);
      $("dps").dataset.value = r.decisions_per_s;
      $("aps").textContent = fmt(r.allowed_per_s);
      $("lps").textContent = fmt(r.limited_per_s);
      if (!history.length || history[history.length - 1].t !== o.at_ms)
        history.push({ t: o.at_ms, allowed: r.allowed_per_s, limited: r.limited_per_s });
      while (history.length > HISTORY) history.shift();
    }
    $("keys").textContent = fmt(o.keys, 0);
    $("kinds").textContent = Object.entries(o.keys_by_kind).filter(([, n]) => n > 0).map(([k, n]) => k + " " + n).join(" · ");
    $("mem").textContent = bytes(o.used_memory);
    $("memmax").textContent = o.maxmemory > 0 ? "of " + bytes(o.maxmemory) + " (" + o.maxmemory_policy + ")" : "no maxmemory";
    $("membar").style.width = o.maxmemory > 0 ? Math.min(100, 100 * o.used_memory / o.maxmemory) + "%" : "0";
    $("clients").textContent = o.clients;
    $("ops").textContent = fmt(o.ops_per_sec) + " commands/s";
    const p50 = r.window_s > 0 && r.latency_p50_us >= 0 ? r.latency_p50_us : o.latency_p50_us;
    const p99 = r.window_s > 0 && r.latency_p99_us >= 0 ? r.latency_p99_us : o.latency_p99_us;
    $("p50").textContent = "p50 " + us(p50);
    $("p99").textContent = "p99 " + us(p99);
    if (o.snapshots) {
      const s = o.snapshots;
      $("snap").textContent = s.loading ? "loading" : s.in_progress ? "saving…" : s.last_success_ms ? "saved " + new Date(s.last_success_ms).toLocaleTimeString() : "never saved";
      $("snapsub").textContent = s.changes_since_save + " changes since · " + s.failed + " failed";
    }
    if (o.cluster) {
      $("cluster").textContent = o.cluster.members + " members";
      $("clustersub").textContent = o.cluster.slots_served + " slots served";
    }
    const tb = $("top").tBodies[0]; tb.replaceChildren();
    for (const k of top) {
      const tr = tb.insertRow();
      cell(tr, k.key + (k.truncated ? "…" : "")); cell(tr, k.kind); cell(tr, fmt(k.count, 0), "bad"); cell(tr, ms(k.ttl_ms));
      tr.onclick = () => { $("ikey").value = k.key; $("tab-inspect").click(); };
    }
    const cb = $("cmds").tBodies[0]; cb.replaceChildren();
    for (const c of r.commands) {
      const tr = cb.insertRow();
      cell(tr, c.command); cell(tr, fmt(c.allowed), "ok"); cell(tr, fmt(c.limited), "bad"); cell(tr, fmt(c.error));
    }
    drawChart();
  } catch (e) {
    $("status").textContent = "error: " + e.message;
  }
}
refresh();
setInterval(refresh, 1000);

// ---- key inspector
$("inspect-form").onsubmit = async (ev) => {
  ev.preventDefault();
  const out = $("inspect-out"); out.replaceChildren();
  const q = new URLSearchParams({ key: $("ikey").value, args: $("iargs").value });
  try {
    const k = await api("/api/v1/key?" + q);
    const dl = document.createElement("dl"); dl.id = "inspect-result";
    const row = (name, value, id) => {
      const dt = document.createElement("dt"); dt.textContent = name;
      const dd = document.createElement("dd"); dd.textContent = value; if (id) dd.id = id;
      dl.append(dt, dd);
    };
    row("key", k.key);
    row("exists", k.exists ? "yes" : "no");
    row("type", k.kind, "inspect-kind");
    row("TTL", ms(k.ttl_ms));
    if (k.command) row("parameters", k.command + " key " + k.params.join(" "));
    if (k.state) {
      row("limit", k.state.limit);
      row("remaining", k.state.remaining, "inspect-remaining");
      row("limited now", k.state.limited ? "yes" : "no");
      row("retry after", k.state.retry_after);
      row("reset after", k.state.reset_after);
    } else if (k.exists) {
      row("state", "give the parameters to read it");
    }
    out.append(dl);
  } catch (e) {
    out.textContent = "error: " + e.message;
  }
};

// ---- playground
const COMMANDS = ["fw.incr", "sw.hit", "tb.take", "cl.throttle", "lb.queue"];
for (const id of ["cmdA", "cmdB"]) for (const c of COMMANDS) $(id).append(new Option(c, c));
$("cmdA").value = "fw.incr"; $("cmdB").value = "sw.hit";
const addStep = (s) => { const t = $("script"); t.value = (t.value.trim() ? t.value.trim() + "\n" : "") + s; };
$("addBurst").onclick = () => addStep("BURST " + $("burstN").value);
$("addSteady").onclick = () => addStep("STEADY " + $("steadyR").value + " " + $("steadyT").value);
$("addAdvance").onclick = () => addStep("ADVANCE " + $("advT").value);
$("clear").onclick = () => { $("script").value = ""; };
$("boundary").onclick = () => {
  $("script").value = "ADVANCE 59s\nBURST 10\nADVANCE 1s\nBURST 10";
};

function drawRun(run, res) {
  const W = 600, H = 180, P = 28;
  const box = document.createElement("div"); box.className = "run";
  const h = document.createElement("h3"); h.textContent = run.command + " " + run.args + " (" + run.kind + ")";
  const tally = document.createElement("div"); tally.className = "tally";
  tally.innerHTML = '<span class="ok">' + run.allowed + " allowed</span> · <span class=\"bad\">" + run.limited + " refused</span>" + (run.errors ? " · " + run.errors + " errors" : "");
  tally.dataset.allowed = run.allowed; tally.dataset.limited = run.limited;
  const svg = el("svg", { viewBox: "0 0 " + W + " " + H, preserveAspectRatio: "none" });
  const dur = Math.max(res.duration_ms, 1);
  let lim = 1;
  for (const d of run.decisions) lim = Math.max(lim, d.limit, d.remaining);
  const x = (t) => P + (W - 2 * P) * t / dur;
  const y = (v) => H - P - (H - 2 * P) * v / lim;
  svg.append(el("line", { x1: P, y1: H - P, x2: W - P, y2: H - P, stroke: "#ccc" }));
  svg.append(el("text", { x: 2, y: y(lim) + 4, "font-size": 10, fill: "#666" }, String(lim)));
  svg.append(el("text", { x: P, y: H - 8, "font-size": 10, fill: "#666" }, "0 s"));
  svg.append(el("text", { x: W - P - 30, y: H - 8, "font-size": 10, fill: "#666" }, (dur / 1000).toFixed(1) + " s"));
  const pts = run.decisions.filter((d) => !d.error).map((d) => x(d.t_ms).toFixed(1) + "," + y(d.remaining).toFixed(1));
  if (pts.length) svg.append(el("polyline", { points: pts.join(" "), fill: "none", stroke: "#3b82f6", "stroke-width": 1.5 }));
  // The timeline under the axis: a dot per request, allowed ones on the
  // upper row, refused ones on the lower.
  for (const d of run.decisions) {
    svg.append(el("circle", { cx: x(d.t_ms), cy: H - P + (d.allowed ? 7 : 15), r: 3, fill: d.allowed ? "#16a34a" : "#dc2626", "fill-opacity": 0.6 }));
  }
  // Every request in order, a square each: the traffic as the key saw it.
  const strip = document.createElement("div"); strip.className = "strip";
  for (const d of run.decisions.slice(0, 400)) {
    const sq = document.createElement("i"); sq.className = d.error ? "" : d.allowed ? "a" : "r";
    sq.title = (d.t_ms / 1000).toFixed(3) + " s: " + (d.error || (d.allowed ? "allowed" : "refused") + ", " + d.remaining + " remaining");
    strip.append(sq);
  }
  box.append(h, tally, svg, strip);
  return box;
}

$("run").onclick = async () => {
  $("play-err").textContent = "";
  const body = {
    limiters: [{ command: $("cmdA").value, args: $("argsA").value }, { command: $("cmdB").value, args: $("argsB").value }],
    script: $("script").value,
  };
  try {
    const res = await api("/api/v1/playground", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    const out = $("play-out"); out.replaceChildren();
    res.runs.forEach((run, i) => { const b = drawRun(run, res); b.id = "run-" + "AB"[i]; out.append(b); });
  } catch (e) {
    $("play-err").textContent = e.message;
  }
};
