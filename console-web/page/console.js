// The console page: places what the core (ratebound compiled to wasm, in
// /core/) says about the configuration beside the fields it concerns. No
// rule of the configuration is written here: validation, readings,
// warnings and counter costs all come from `read` in the core.

const token = new URLSearchParams(location.search).get("token") || "";
const $ = (id) => document.getElementById(id);
const PER = ["route", "address", "user", "token", "org", "account", "model"];
const SCOPE = ["", "node", "installation", "fleet"];
const FIELDS = ["name", "per", "applies_to", "limit", "window", "scope"];

let core = null;
let config = { routes: [] };
let inventories = {}; // route name -> {spec, operations}
let admins = [];
let fileFormat = "json";
let updates = 0;

async function api(path, body) {
  const init = { method: body === undefined ? "GET" : "POST", headers: { "X-Ratebound-Token": token } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const r = await fetch("/api/" + path, init);
  let b = {};
  try { b = await r.json(); } catch (_) { /* an empty or non-JSON answer */ }
  return { status: r.status, body: b };
}

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k === "text") e.textContent = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}

function banner(message) {
  document.body.prepend(el("div", { class: "banner", "data-testid": "banner", text: message }));
  $("status").textContent = message;
  $("status").className = "status bad";
}

function fieldValue(field, input) {
  const v = input.value;
  switch (field) {
    case "limit": return /^\s*-?\d+\s*$/.test(v) ? Number(v) : v;
    // As typed ("partner and trial"): the core reads the words.
    case "applies_to": return v.trim() === "" ? undefined : v;
    case "name": case "scope": return v === "" ? undefined : v;
    default: return v;
  }
}

function fieldText(field, bound) {
  const v = bound[field];
  if (field === "applies_to") return typeof v === "string" ? v : v ? core.applies_text(JSON.stringify(v)) : "";
  return v === undefined || v === null ? "" : String(v);
}

// ---- fields drawn from the configuration's JSON Schema (the core's) ----

const forms = new Map();
function form(def) {
  if (!forms.has(def)) forms.set(def, JSON.parse(core.fields(def)));
  return forms.get(def);
}

// The object at `keys` in the configuration (undefined if absent).
function getIn(keys) {
  let o = config;
  for (const k of keys) { if (o === undefined || o === null) return undefined; o = o[k]; }
  return o;
}

// Sets (or, for undefined, deletes) `name` of the object at `keys`,
// creating the objects on the way; `prune` objects left empty are taken
// out again (an empty match or service says nothing).
function setIn(keys, name, value, prune) {
  let o = config;
  for (const k of keys) o = (o[k] ??= {});
  if (value === undefined) delete o[name]; else o[name] = value;
  for (let n = keys.length; n > 0; n -= 1) {
    const parent = getIn(keys.slice(0, n - 1));
    const key = keys[n - 1];
    if (!prune.includes(key) || Object.keys(parent[key] || {}).length) break;
    delete parent[key];
  }
}

function idOf(path) { return "f" + path.replace(/[^A-Za-z0-9]+/g, "_"); }

// As typed: a number when it is one, else the text (the core says why it
// is no number); an empty field is an absent one.
function typed(kind, input, dflt) {
  const v = input.value;
  switch (kind) {
    case "flag": return input.checked === (dflt ?? false) ? undefined : input.checked;
    case "number": return v.trim() === "" ? undefined : /^\s*-?\d+\s*$/.test(v) ? Number(v) : v;
    case "list": { const xs = v.split(/[\s,]+/).filter(Boolean); return xs.length ? xs : undefined; }
    default: return v === "" ? undefined : v;
  }
}

// The fields of definition `def` for the object at `keys` (path `path`):
// a label, the input, the schema's description, and where its errors go.
function schemaFields(keys, path, def, prune, depth = 0, compact = false) {
  const obj = getIn(keys) || {};
  const out = [];
  for (const f of form(def).fields) {
    const p = `${path}.${f.name}`;
    const label = f.name.replace(/_/g, " ");
    if (f.kind === "object") {
      if (depth > 0) continue; // nested twice (a key secret's also_read): not on the page
      out.push(el("fieldset", { class: "nested", "data-path": p }, el("legend", { text: label }),
        f.description ? el("div", { class: "hint", text: f.description }) : null,
        ...schemaFields([...keys, f.name], p, f.object, [...prune, f.name], depth + 1, compact),
        el("div", { class: "field-error", "data-error-for": p })));
      continue;
    }
    const id = idOf(p);
    const hint = f.description ? `${id}-hint` : undefined;
    const v = obj[f.name];
    let input;
    if (f.kind === "choice") {
      input = el("select", { id, "data-path": p });
      input.append(el("option", { value: "", text: f.default !== null && f.default !== undefined ? `(${f.default})` : "(none)" }));
      for (const o of f.options) input.append(el("option", { value: o.value, text: o.value, title: o.description }));
      input.value = v ?? "";
    } else if (f.kind === "flag") {
      input = el("input", { id, type: "checkbox", "data-path": p });
      input.checked = v ?? f.default ?? false;
    } else {
      input = el("input", { id, "data-path": p, spellcheck: "false", autocomplete: "off",
        inputmode: f.kind === "number" ? "numeric" : undefined,
        placeholder: f.default !== null && f.default !== undefined && !(Array.isArray(f.default) && !f.default.length) ? String(f.default) : f.kind === "list" ? "any" : undefined,
        value: v === undefined || v === null ? "" : Array.isArray(v) ? v.join(", ") : String(v) });
    }
    if (hint) input.setAttribute("aria-describedby", hint);
    if (compact && f.description) input.title = f.description;
    input.addEventListener(f.kind === "flag" || f.kind === "choice" ? "change" : "input", () => {
      setIn(keys, f.name, f.kind === "choice" ? (input.value || undefined) : typed(f.kind, input, f.default), prune);
      update();
    });
    out.push(el("div", { class: `form-field ${f.kind}` },
      el("label", { for: id, text: label + (f.required ? " (required)" : "") }), input,
      hint ? el("div", { class: compact ? "hint visually-hidden" : "hint", id: hint, text: f.description }) : null,
      el("div", { class: "field-error", "data-error-for": p })));
  }
  return out;
}

// Who the caller is: each source of the identity, chosen by its box, with
// its fields once chosen; its notes (a header source's) under it.
function identityPart() {
  const part = $("identity");
  const top = form("IdentityConfig");
  part.replaceChildren(el("h2", { id: "identity-title", text: "Who is the caller: identity" }),
    el("p", { class: "hint", text: top.description }),
    el("div", { class: "field-error", "data-error-for": "$.identity" }));
  for (const f of top.fields) {
    const p = `$.identity.${f.name}`;
    const chosen = getIn(["identity", f.name]) !== undefined && getIn(["identity", f.name]) !== null;
    const box = el("input", { type: "checkbox", id: idOf(p), "data-path": p, "data-testid": `identity-${f.name}` });
    box.checked = chosen;
    box.addEventListener("change", () => {
      if (box.checked) (config.identity ??= {})[f.name] = {};
      else {
        delete config.identity[f.name];
        if (!Object.keys(config.identity).length) delete config.identity;
      }
      identityPart();
      update();
      // Drawn anew: the focus stays on the box.
      document.querySelector(`[data-path="${CSS.escape(p)}"]`)?.focus();
    });
    const src = form(f.object);
    part.append(el("fieldset", { class: "source", "data-source": f.name },
      el("legend", {}, box, el("label", { for: box.id, text: ` ${f.name}` })),
      el("div", { class: "hint", text: src.description }),
      ...(chosen ? schemaFields(["identity", f.name], p, f.object, []) : []),
      el("div", { class: "field-error", "data-error-for": p }),
      el("div", { class: "notes", "data-notes-for": p })));
  }
}

// The rate-limit service installation and fleet bounds are counted by:
// shown once a bound needs it (the core says which do) or it is written.
function servicePart() {
  const part = $("service");
  part.replaceChildren(el("h2", { id: "service-title", text: "Rate-limit service (installation and fleet bounds)" }),
    el("p", { class: "hint", text: form("RateLimitServiceConfig").description }),
    el("div", { class: "form", "data-path": "$.rate_limit_service" },
      ...schemaFields(["rate_limit_service"], "$.rate_limit_service", "RateLimitServiceConfig", ["rate_limit_service"])),
    el("div", { class: "field-error", "data-error-for": "$.rate_limit_service" }),
    el("div", { class: "notes", "data-notes-for": "$.rate_limit_service" }));
}

// ---- the screen ----

function suggest(input, list) {
  const words = JSON.parse(core.applies_suggestions(JSON.stringify(config), input.value));
  list.replaceChildren(...words.map((w) => el("option", { value: w })));
}

function boundRow(bounds, j, path, onRemove) {
  const b = bounds[j];
  const tr = el("tr", { "data-path": path });
  for (const field of FIELDS) {
    const p = `${path}.${field}`;
    // Named for a screen reader as its column and row are seen.
    const label = `${field.replace("_", " ")} of bound ${j + 1} of ${path.replace(/^\$\./, "")}`;
    let input;
    if (field === "per" || field === "scope") {
      input = el("select", { "data-path": p, class: field });
      for (const o of field === "per" ? PER : SCOPE) {
        input.append(el("option", { value: o, text: o === "" ? "(node)" : o }));
      }
      input.value = fieldText(field, b);
      input.setAttribute("aria-label", label);
    } else {
      input = el("input", { "data-path": p, class: field === "applies_to" ? "applies" : field, value: fieldText(field, b), spellcheck: "false", autocomplete: "off",
        placeholder: { name: `b${j}`, applies_to: "everyone", window: "PT1M", limit: "" }[field], "aria-label": label });
    }
    input.addEventListener("input", () => {
      const v = fieldValue(field, input);
      if (v === undefined) delete b[field]; else b[field] = v;
      update();
      if (list) suggest(input, list);
    });
    let list = null;
    if (field === "applies_to") {
      // Suggestions from the roles and organisations the configuration
      // names (the core's), as the words are typed.
      list = el("datalist", { id: `suggest-${p}` });
      input.setAttribute("list", list.id);
      input.addEventListener("focus", () => suggest(input, list));
    }
    tr.append(el("td", {}, input, list, el("div", { class: "field-error", "data-error-for": p })));
  }
  tr.append(el("td", { class: "reading", "data-reading": path }));
  tr.append(el("td", { class: "live-cell", "data-live-for": path }));
  tr.append(el("td", {}, el("button", { title: "remove this bound", onclick: onRemove, text: "✕" })));
  return tr;
}

function boundsTable(bounds, path, addLabel) {
  const head = el("tr", {}, ...["name", "per", "applies to", "limit", "window", "scope", "where the number is typed", admins.length ? "live" : "", ""].map((h) => el("th", { text: h })));
  const body = el("tbody");
  bounds.forEach((_, j) => body.append(boundRow(bounds, j, `${path}.bounds[${j}]`, () => { bounds.splice(j, 1); render(); })));
  const add = el("button", { "data-testid": `add-bound-${path}`, text: addLabel, onclick: () => {
    bounds.push({ per: "address", limit: 100, window: "PT1M" });
    render();
  } });
  return [el("table", {}, el("thead", {}, head), body), add];
}

function sameOperation(a, b) {
  return a.method === b.method && a.path === b.path;
}

function operationsPart(route, i) {
  const path = `$.routes[${i}]`;
  const ops = route.operations || [];
  const part = el("div", { class: "ops", "data-path": `${path}.operations` },
    el("h3", { text: "Operations of the route's OpenAPI inventory with bounds of their own" }));
  ops.forEach((op, k) => {
    const opPath = `${path}.operations[${k}]`;
    const title = `${op.method} ${op.path}` + (op.operation_id ? ` (${op.operation_id})` : "");
    part.append(el("div", { "data-path": opPath },
      el("strong", { text: title }), " ",
      el("button", { text: "remove", title: "this operation no longer carries bounds of its own", onclick: () => { ops.splice(k, 1); if (!ops.length) delete route.operations; render(); } }),
      el("div", { class: "field-error", "data-error-for": opPath }),
      ...boundsTable(op.bounds ||= [], opPath, "+ bound of this operation")));
  });
  part.append(el("div", { class: "cost", "data-cost": String(i), "data-testid": `cost-${i}` }));
  const inv = inventories[route.name];
  const file = el("input", { type: "file", accept: ".json,.yaml,.yml", "data-testid": `openapi-file-${i}`, "aria-label": `OpenAPI document of route ${i + 1}` });
  file.addEventListener("change", async () => {
    const f = file.files[0];
    if (!f) return;
    const r = await api("openapi", { name: f.name, text: await f.text() });
    if (r.status === 200) { inventories[route.name] = r.body; render(); }
    else setStatus(`${f.name}: ` + (r.body.errors ? r.body.errors.map((e) => e.text).join("; ") : r.body.error), true);
  });
  part.append(el("div", {}, el("span", { class: "hint", text: inv ? `Inventory: ${inv.spec} — choose operations one by one ` : "Load the route's OpenAPI document: " }), file));
  if (inv) {
    const list = el("ul", { "data-testid": `inventory-${i}` });
    for (const entry of inv.operations) {
      const chosen = entry.operation && ops.some((o) => sameOperation(o, entry.operation));
      const button = el("button", { text: chosen ? "chosen" : "choose", "data-testid": `choose ${entry.title}`, onclick: () => {
        (route.operations ||= []).push(structuredClone(entry.operation));
        render();
      } });
      button.disabled = chosen || !entry.operation;
      list.append(el("li", {}, el("span", { text: entry.title + (entry.error ? ` — ${entry.error}` : "") }), button));
    }
    part.append(el("div", { class: "inventory" }, list));
  }
  return part;
}

function render() {
  const main = $("routes");
  main.replaceChildren();
  (config.routes || []).forEach((route, i) => {
    const path = `$.routes[${i}]`;
    route.bounds ||= [];
    const name = el("input", { class: "route-name", "data-path": `${path}.name`, "aria-label": `name of route ${i + 1}`, value: route.name ?? "", spellcheck: "false", autocomplete: "off" });
    name.addEventListener("input", () => { route.name = name.value; update(); });
    const remove = el("button", { class: "remove-route", "data-testid": `remove-route-${i}`, "aria-label": `remove route ${i + 1}`, text: "remove route", onclick: () => {
      config.routes.splice(i, 1);
      render();
    } });
    main.append(el("section", { class: "route", "data-path": path, "data-route": route.name },
      el("h2", {}, name, " ", remove),
      el("div", { class: "field-error", "data-error-for": `${path}.name` }),
      el("fieldset", { class: "match", "data-path": `${path}.match` }, el("legend", { text: `match of route ${i + 1}` }),
        ...schemaFields(["routes", i, "match"], `${path}.match`, "MatchConfig", ["match"], 0, true)),
      el("div", { class: "matches", "data-matches": path }),
      el("div", { class: "field-error", "data-error-for": path }),
      el("div", { "data-route-warnings": path, "data-testid": `route-warnings-${i}` }),
      ...boundsTable(route.bounds, path, "+ bound"),
      operationsPart(route, i)));
  });
  identityPart();
  servicePart();
  update();
}

// ---- the reading, on every keystroke ----

function setStatus(text, bad) {
  $("status").textContent = text;
  $("status").className = bad ? "status bad" : "status";
}

// The element an error belongs at: the deepest data-path that holds it.
function placeFor(path) {
  let best = null;
  for (const e of document.querySelectorAll("[data-error-for]")) {
    const p = e.getAttribute("data-error-for");
    if ((path === p || path.startsWith(p + ".") || path.startsWith(p + "[")) && (!best || p.length > best.getAttribute("data-error-for").length)) best = e;
  }
  return best;
}

function update() {
  if (!core) return;
  const t0 = performance.now();
  const nodes = parseInt($("nodes").value, 10);
  const r = JSON.parse(core.read(JSON.stringify(config), Number.isFinite(nodes) && nodes > 0 ? nodes : 0));
  show(r);
  const ms = performance.now() - t0;
  updates += 1;
  const times = (window.__ratebound && window.__ratebound.times) || [];
  times.push(ms);
  window.__ratebound = { reading: r, lastUpdateMs: ms, updates, times };
  $("timing").textContent = `read and shown in ${ms.toFixed(1)} ms`;
}

// Where a note about the identity or the service goes: the deepest
// data-notes-for that holds its path (none: it is the route's).
function notesFor(path) {
  let best = null;
  for (const e of document.querySelectorAll("[data-notes-for]")) {
    const p = e.getAttribute("data-notes-for");
    if ((path === p || path.startsWith(p + ".")) && (!best || p.length > best.getAttribute("data-notes-for").length)) best = e;
  }
  return best;
}

function show(r) {
  $("service").hidden = !(r.needs_service || config.rate_limit_service);
  for (const e of document.querySelectorAll("[data-error-for]")) e.textContent = "";
  for (const e of document.querySelectorAll(".invalid")) e.classList.remove("invalid");
  const unplaced = [];
  for (const e of r.errors) {
    const at = placeFor(e.at || e.path);
    if (!at) { unplaced.push(e); continue; }
    at.append(el("div", { "data-error-path": e.path, text: e.text }));
    const input = document.querySelector(`[data-path="${CSS.escape(at.getAttribute("data-error-for"))}"]`);
    if (input && (input.tagName === "INPUT" || input.tagName === "SELECT")) input.classList.add("invalid");
  }
  $("errors").replaceChildren(...unplaced.map((e) => el("li", { text: e.text })));
  for (const c of document.querySelectorAll(".reading")) c.classList.toggle("stale", !r.valid);
  if (!r.valid) {
    setStatus(`invalid: ${r.errors.length} error${r.errors.length === 1 ? "" : "s"}, each at its field — the file is not saved until they are fixed (the readings are the last valid ones)`, true);
    return;
  }
  setStatus(`valid: ${r.explanation.summary.routes} routes, ${r.explanation.summary.bounds} bounds, ${r.explanation.summary.warnings} warnings`, false);
  $("budget").textContent = r.budget.words;
  for (const e of document.querySelectorAll("[data-notes-for]")) e.replaceChildren();
  r.explanation.routes.forEach((route, i) => {
    const m = document.querySelector(`[data-matches="${route.path}"]`);
    if (m) m.textContent = `match: ${route.matches}`;
    const w = document.querySelector(`[data-route-warnings="${route.path}"]`);
    const said = (x) => el("div", { class: x.level === "warning" ? "route-warning" : "hint", "data-code": x.code, text: `${x.level}: ${x.message}` });
    const own = [];
    // A note about the identity or the service is said there, not here.
    for (const x of route.warnings) {
      const at = notesFor(x.path);
      if (at) at.append(said(x)); else own.push(x);
    }
    if (w) w.replaceChildren(...own.map(said));
    for (const o of route.operations) {
      const at = document.querySelector(`[data-error-for="${o.path}"]`);
      if (at) at.replaceChildren(...o.warnings.map((x) => el("div", { class: "route-warning", "data-code": x.code, text: `${x.level}: ${x.message}` })));
    }
    for (const phase of route.phases) {
      for (const row of phase.bounds) {
        const cell = document.querySelector(`[data-reading="${row.path}"]`);
        if (!cell) continue;
        cell.closest("tr").setAttribute("data-live", `${route.name}/${row.name}`);
        showReading(cell, route.name, row);
      }
    }
    const cost = document.querySelector(`[data-cost="${i}"]`);
    if (cost && r.costs[i]) cost.textContent = `counter cost: ${r.costs[i].words}`;
  });
}

// A bound's reading where its number is typed: its line; its warnings;
// the full statement (row.detail, one statement a line) behind a
// disclosure, which stays open across keystrokes once opened.
function showReading(cell, routeName, row) {
  let line = cell.querySelector(".line");
  let more = cell.querySelector("details");
  if (!line || !more) {
    line = el("div", { class: "line", "data-line": row.path });
    const summary = el("summary", { text: "full reading" });
    more = el("details", { class: "detail" }, summary, el("div", { class: "detail-text", "data-detail": row.path }));
    cell.replaceChildren(line, el("div", { class: "bound-warnings" }), more);
  }
  line.textContent = row.line;
  more.querySelector("summary").setAttribute("aria-label", `full reading of bound ${routeName}/${row.name}`);
  more.querySelector(".detail-text").textContent = row.detail;
  cell.querySelector(".bound-warnings").replaceChildren(...row.warnings.filter((x) => x.level === "warning")
    .map((x) => el("div", { class: x.level, "data-code": x.code, text: x.message })));
}

// ---- save and export ----

function dialog(title, body, okText) {
  $("dialog-title").textContent = title;
  $("dialog-body").replaceChildren(...body);
  $("dialog-ok").textContent = okText || "OK";
  $("dialog-cancel").hidden = !okText;
  const d = $("dialog");
  d.showModal();
  return new Promise((resolve) => {
    const done = (v) => () => { d.close(); $("dialog-ok").onclick = $("dialog-cancel").onclick = null; resolve(v); };
    $("dialog-ok").onclick = done(true);
    $("dialog-cancel").onclick = done(false);
  });
}

function errorsText(b) {
  return b.errors ? b.errors.map((e) => e.text).join("; ") : b.error;
}

async function save() {
  const last = window.__ratebound && window.__ratebound.reading;
  if (last && !last.valid) {
    setStatus(`not saved: fix the ${last.errors.length === 1 ? "error" : `${last.errors.length} errors`} at ${last.errors.length === 1 ? "its field" : "their fields"} first`, true);
    return;
  }
  const p = await api("preview", { config });
  if (p.status !== 200) { setStatus("not saved: " + errorsText(p.body), true); return; }
  if (p.body.unchanged) { await dialog("Nothing to save", [el("p", { text: `${p.body.file} already holds this configuration.` })]); return; }
  const resets = p.body.resets.length
    ? `Saving resets the counters of ${p.body.resets.length === 1 ? "route" : "routes"} ${p.body.resets.join(", ")} (a route saved anew counts from zero).`
    : "Saving resets no route's counters.";
  const diff = el("pre", { "data-testid": "diff" }, ...p.body.changes.map(([op, line]) =>
    el("div", { class: op === "+" ? "diff-add" : op === "-" ? "diff-del" : "", text: `${op} ${line}` })));
  const ok = await dialog(`Save ${p.body.file} (${p.body.format})?`, [el("p", { "data-testid": "resets", text: resets }), diff], "Save");
  if (!ok) { setStatus("not saved", false); return; }
  const s = await api("save", { config });
  if (s.status === 200) $("note").hidden = true;
  if (s.status === 200) setStatus(`saved ${s.body.written} (${s.body.bytes} bytes)` + (s.body.resets.length ? `; counters reset: ${s.body.resets.join(", ")}` : ""), false);
  else setStatus("not saved: " + errorsText(s.body), true);
}

async function exportManifest() {
  const last = window.__ratebound && window.__ratebound.reading;
  if (last && !last.valid) { setStatus("not exported: the configuration is invalid", true); return; }
  const r = await api("export", { config });
  if (r.status !== 200) { setStatus("not exported: " + errorsText(r.body), true); return; }
  const url = URL.createObjectURL(new Blob([r.body.manifest], { type: "application/yaml" }));
  await dialog("Istio WasmPlugin manifest", [
    el("p", {}, el("a", { href: url, download: r.body.name, "data-testid": "download", text: `Download ${r.body.name}` })),
    el("pre", { "data-testid": "manifest", text: r.body.manifest })]);
  URL.revokeObjectURL(url);
}

// ---- live ----

function fmt(x) { return x === null || x === undefined ? "–" : x < 10 ? x.toFixed(1) : x.toFixed(0); }

function liveCell(n, cap) {
  if (!n) return el("td", { class: "live-cell", text: "–" });
  return el("td", { class: "live-cell" },
    el("span", { text: `${fmt(n.allowed_per_s)}/s allowed · ` }),
    el("span", { class: n.refused_per_s > 0 ? "refusing" : "", "data-refused": String(n.refused_per_s), text: `${fmt(n.refused_per_s)}/s refused` }),
    el("span", { text: n.tracked === null || n.tracked === undefined ? "" : ` · ${n.tracked}/${cap} tracked` }));
}

async function pollLive() {
  const r = await api("live");
  if (r.status !== 200) { $("live-status").textContent = r.body.error || `live: HTTP ${r.status}`; return; }
  const cap = r.body.tracked_cap;
  $("live-head").replaceChildren(el("tr", {}, el("th", { text: "route / bound" }),
    ...admins.map((a) => el("th", { text: a })), el("th", { text: `all ${admins.length} nodes` })));
  $("live-body").replaceChildren(...r.body.bounds.map((b) => el("tr", { "data-live-row": `${b.route}/${b.bound}` },
    el("td", { text: `${b.route} / ${b.bound}` }), ...b.nodes.map((n) => liveCell(n, cap)), liveCell(b.sum, b.sum.tracked_cap))));
  for (const c of document.querySelectorAll("[data-live-for]")) {
    const key = c.closest("tr").getAttribute("data-live");
    const b = r.body.bounds.find((x) => `${x.route}/${x.bound}` === key);
    c.replaceChildren(...(b ? liveCell(b.sum, b.sum.tracked_cap).childNodes : []));
  }
  const errs = r.body.nodes.filter((n) => n.error).map((n) => `${n.admin}: ${n.error}`);
  const warming = r.body.nodes.some((n) => !n.error && !n.top);
  $("live-status").textContent = errs.length ? errs.join("; ") : warming ? "first sample taken; rates from the next" : `updated ${new Date().toLocaleTimeString()}`;
}

// ---- start ----

async function main() {
  try {
    core = await import("/core/ratebound_console_web.js");
    await core.default();
    $("core-version").textContent = `· core ${core.version()} (wasm)`;
    // The first invalid reading builds check's JSON Schema validator
    // (about 90 ms); built now, the first typo is as quick as the rest.
    core.read('{"routes": 0}', 0);
  } catch (_) {
    banner("The browser core was not built into this ratebound binary: run scripts/console-web.sh, then build the CLI again (./build.sh does both).");
    return;
  }
  const s = await api("state");
  if (s.status !== 200) { banner(s.body.error || `HTTP ${s.status}`); return; }
  $("file").textContent = `${s.body.file} (${s.body.format})`;
  fileFormat = s.body.format;
  config = s.body.config && typeof s.body.config === "object" ? s.body.config : { routes: [] };
  admins = s.body.admins;
  for (const inv of s.body.inventories) inventories[inv.route] = inv;
  $("nodes").value = s.body.nodes ?? "";
  $("nodes").addEventListener("input", update);
  $("save").addEventListener("click", save);
  $("export").addEventListener("click", exportManifest);
  // A new route: a name not yet taken and one bound to edit, as a new
  // bound starts (the core judges both as they are typed).
  $("add-route").addEventListener("click", () => {
    const taken = new Set((config.routes ||= []).map((r) => r.name));
    let n = config.routes.length + 1;
    while (taken.has(`route${n}`)) n += 1;
    config.routes.push({ name: `route${n}`, bounds: [{ per: "address", limit: 100, window: "PT1M" }] });
    render();
    document.querySelector(`[data-path="$.routes[${config.routes.length - 1}].name"]`)?.focus();
  });
  // Said by the server (FILE does not exist yet, and what creates it).
  if (s.body.note) { $("note").textContent = s.body.note; $("note").hidden = false; }
  render();
  if (admins.length) {
    $("live").hidden = false;
    pollLive();
    setInterval(pollLive, 2000);
  }
  window.__ratebound_ready = true;
}

main();
