// dreamwell memory browser: plain JavaScript, no build step, nothing from the network.
"use strict";
const csrf = document.querySelector('meta[name="dreamwell-csrf"]').content;
const $ = (id) => document.getElementById(id);
let category = "";

function status(text) { $("status").textContent = text || ""; }

async function api(path, body) {
  const headers = { "x-dreamwell-csrf": csrf };
  const token = sessionStorage.getItem("dreamwell-token");
  if (token) headers.authorization = "Bearer " + token;
  const init = { headers, method: body === undefined ? "GET" : "POST" };
  if (body !== undefined) { headers["content-type"] = "application/json"; init.body = JSON.stringify(body); }
  const response = await fetch(path, init);
  if (response.status === 401) { $("login").hidden = false; throw new Error("sign in with a bearer token"); }
  const data = await response.json();
  if (!response.ok) throw new Error(data.error || response.statusText);
  return data;
}

function field(dl, name, value) {
  if (value === null || value === undefined || value === "") return;
  const dt = document.createElement("dt"); dt.textContent = name;
  const dd = document.createElement("dd"); dd.textContent = value;
  dl.append(dt, dd);
}

function day(iso) { return iso ? iso.slice(0, 19).replace("T", " ") : ""; }

function card(m) {
  const li = $("card").content.firstElementChild.cloneNode(true);
  li.dataset.id = m.id;
  li.classList.toggle("archived", !m.live);
  li.querySelector(".content").textContent = m.content;
  const dl = li.querySelector(".fields");
  field(dl, "id", m.id);
  field(dl, "category", m.category || "(none)");
  field(dl, "tags", m.tags.join(", "));
  field(dl, "importance", m.importance.toFixed(2));
  field(dl, "score", m.score.toFixed(2));
  field(dl, "reinforced", m.reinforcement_count + "×");
  field(dl, "first seen", day(m.created_at));
  field(dl, "last seen", day(m.last_seen_at));
  field(dl, "merged from", m.metadata.merged_from);
  field(dl, "derived from", m.metadata.derived_from);
  field(dl, "archived", day(m.archived_at));
  li.querySelector(".archive").hidden = !m.live;
  li.querySelector(".restore").hidden = m.live;
  const form = li.querySelector(".editor");
  li.querySelector(".edit").onclick = () => {
    form.content.value = m.content; form.category.value = m.category || "";
    form.tags.value = m.tags.join(", "); form.importance.value = m.importance;
    form.hidden = false;
  };
  li.querySelector(".cancel").onclick = () => { form.hidden = true; };
  form.onsubmit = (event) => {
    event.preventDefault();
    act(m.id, "edit", { content: form.content.value, category: form.category.value,
      tags: form.tags.value, importance: form.importance.value });
  };
  li.querySelector(".archive").onclick = () => act(m.id, "archive");
  li.querySelector(".restore").onclick = () => act(m.id, "restore");
  return li;
}

async function act(id, action, body) {
  try {
    await api(`/ui/api/memories/${id}/${action}`, body || {});
    status(action === "edit" ? "Saved." : action === "archive" ? "Deleted (restorable)." : "Restored.");
    await refresh();
  } catch (error) { status(error.message); }
}

function tree(rows) {
  const root = {};
  for (const { category: path, count } of rows) {
    let node = root;
    for (const part of path.split("/")) { node[part] = node[part] || { _n: 0 }; node = node[part]; }
    node._n += count;
  }
  const build = (node, prefix) => {
    const ul = document.createElement("ul");
    for (const name of Object.keys(node).filter((k) => k !== "_n").sort()) {
      const path = prefix ? prefix + "/" + name : name;
      const li = document.createElement("li");
      const a = document.createElement("a");
      a.textContent = node[name]._n ? `${name} (${node[name]._n})` : name;
      a.dataset.category = path;
      a.classList.toggle("chosen", path === category);
      a.onclick = () => { category = path === category ? "" : path; $("category").value = category; refresh(); };
      li.append(a, build(node[name], path));
      ul.append(li);
    }
    return ul;
  };
  $("tree").replaceChildren(...build(root, "").children);
}

// Each drawing asks for a turn; an older request answering late must not draw over a newer one.
const turns = {};
function turn(name) {
  const mine = (turns[name] = (turns[name] || 0) + 1);
  return () => turns[name] === mine;
}

async function refresh() {
  const current = turn("list");
  try {
    const params = new URLSearchParams({ q: $("q").value, category: $("category").value,
      tags: $("tags").value, archived: $("archived").value });
    category = $("category").value;
    const [found, cats] = await Promise.all([api("/ui/api/memories?" + params), api("/ui/api/categories")]);
    if (!current()) return;
    tree(cats.categories);
    $("count").textContent = `${found.memories.length} memories`;
    $("list").replaceChildren(...found.memories.map(card));
  } catch (error) { if (current()) status(error.message); }
}

// ---- dreams ----------------------------------------------------------------------------
function words(text) { return (text || "").split(/(\s+)/); }

function diffText(before, after) {
  // word-level longest common subsequence: enough for memory-sized texts
  const a = words(before), b = words(after);
  const m = a.map(() => new Array(b.length + 1).fill(0));
  m.push(new Array(b.length + 1).fill(0));
  for (let i = a.length - 1; i >= 0; i--)
    for (let j = b.length - 1; j >= 0; j--)
      m[i][j] = a[i] === b[j] ? m[i + 1][j + 1] + 1 : Math.max(m[i + 1][j], m[i][j + 1]);
  const out = document.createElement("span");
  let i = 0, j = 0;
  const put = (tag, text) => { const el = document.createElement(tag); el.textContent = text; out.append(el); };
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) { put("span", a[i]); i++; j++; }
    else if (j < b.length && (i >= a.length || m[i][j + 1] >= m[i + 1][j])) { put("ins", b[j]); j++; }
    else { put("del", a[i]); i++; }
  }
  return out;
}

const SHOWN = ["content", "category", "tags", "importance", "score", "reinforcement_count",
  "created_at", "last_seen_at", "archived_at", "metadata"];

function show(value) {
  if (value === null || value === undefined) return "";
  return typeof value === "object" ? JSON.stringify(value) : String(value);
}

// a skill change (kind skill-*) holds the skill's whole records: its SKILL.md is diffed as text
const SKILL_SHOWN = ["status", "pinned", "see_also", "created_at", "SKILL.md"];

function skillField(record, key) {
  if (!record) return undefined;
  if (key !== "SKILL.md") return record[key];
  return record.files ? (record.files["SKILL.md"] || {}).text : record["SKILL.md"];
}

function change(c) {
  const box = document.createElement("div"); box.className = "change";
  const h = document.createElement("h3");
  const skill = c.kind.startsWith("skill-");
  const b = skill ? c.skill_before : c.before, a = skill ? c.skill_after : c.after;
  const who = skill ? (a || b).name : (a || b).id;
  h.textContent = `${c.kind} [${who}]` + (c.sources.length ? ` from ${c.sources.join(", ")}` : "") + (c.note ? ` — ${c.note}` : "");
  const table = document.createElement("table"); table.className = "diff";
  const head = table.insertRow(); for (const t of ["field", "before → after"]) { const th = document.createElement("th"); th.textContent = t; head.append(th); }
  const field = skill ? skillField : (record, key) => record && record[key];
  for (const key of skill ? SKILL_SHOWN : SHOWN) {
    const before = show(field(b, key)), after = show(field(a, key));
    if (before === after) continue;
    const row = table.insertRow();
    row.insertCell().textContent = key;
    row.insertCell().append(diffText(before, after));
  }
  box.append(h, table);
  return box;
}

function report(r) {
  const view = $("report");
  const title = document.createElement("h2");
  title.textContent = `${r.run}${r.dry_run ? " (preview, nothing changed)" : ""}${r.undone ? " — undone" : ""}`;
  const items = [title];
  if (!r.dry_run && !r.undone) {
    const undo = document.createElement("button"); undo.type = "button"; undo.id = "undo";
    undo.textContent = "Undo this cycle";
    undo.onclick = async () => {
      try { if (await shown(`/ui/api/dreams/${r.run}/undo`, {})) status("Undone."); await runs(); }
      catch (error) { status(error.message); }
    };
    items.push(undo);
  }
  for (const p of r.passes) {
    const line = document.createElement("p");
    line.textContent = `${p.name}: ${p.status}${p.reason ? " (" + p.reason + ")" : ""}, ${p.changes.length} change(s)`;
    items.push(line, ...p.changes.map(change));
  }
  view.replaceChildren(...items);
}

// a dream report, drawn unless another was asked for meanwhile; true when drawn
async function shown(path, body) {
  const current = turn("report");
  const answer = await api(path, body);
  if (current()) report(answer);
  return current();
}

async function runs() {
  const current = turn("runs");
  const data = await api("/ui/api/dreams");
  if (!current()) return;
  $("runs").replaceChildren(...data.dreams.map((d) => {
    const li = document.createElement("li"); li.className = "run";
    li.textContent = `${d.run} — ${d.changes} change(s)${d.dry_run ? ", preview" : ""}${d.undone ? ", undone" : ""}`;
    li.onclick = async () => { try { await shown(`/ui/api/dreams/${d.run}`); } catch (e) { status(e.message); } };
    return li;
  }));
}

async function dream(mode) {
  status(mode === "preview" ? "Planning a dream…" : "Dreaming…");
  try { if (await shown(`/ui/api/dream/${mode}`, {})) status("Done."); await runs(); }
  catch (error) { status(error.message); }
}

function tab(name) {
  $("memories-view").hidden = name !== "memories";
  $("dreams-view").hidden = name !== "dreams";
  $("tab-memories").classList.toggle("active", name === "memories");
  $("tab-dreams").classList.toggle("active", name === "dreams");
  if (name === "dreams") runs().catch((e) => status(e.message));
}

$("search").onsubmit = (event) => { event.preventDefault(); refresh(); };
$("archived").onchange = refresh;
$("tab-memories").onclick = () => tab("memories");
$("tab-dreams").onclick = () => tab("dreams");
$("preview").onclick = () => dream("preview");
$("apply").onclick = () => dream("apply");
$("login").onsubmit = (event) => {
  event.preventDefault();
  sessionStorage.setItem("dreamwell-token", $("token").value);
  $("login").hidden = true; status(""); refresh();
};
refresh();
