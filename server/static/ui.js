// dreamwell memory browser: plain JavaScript, no build step, nothing from the network.
// The page is a set of views (Memories, Dreams, ...), each a module in `views` with
// `show()` (drawn when chosen) and optionally `changed()` (memory moved elsewhere); the
// switcher in <nav id="views"> has one button per view, so a new view is one button in
// ui.html, one <section data-panel> and one entry in `views`.
"use strict";
const csrf = document.querySelector('meta[name="dreamwell-csrf"]').content;
const $ = (id) => document.getElementById(id);
const el = (tag, text, cls) => {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
};
const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;

// ---- the status line: messages clear themselves; one may carry an Undo -----------------
let statusTimer = 0;
function status(text, undo) {
  clearTimeout(statusTimer);
  $("status-text").textContent = text || "";
  const button = $("status-undo");
  button.hidden = !undo;
  button.onclick = undo ? () => { button.hidden = true; undo(); } : null;
  if (text) statusTimer = setTimeout(() => status(""), undo ? 10000 : 6000);
}

class ApiError extends Error {
  constructor(message, code, data) { super(message); this.code = code; this.data = data; }
}

async function api(path, body) {
  const headers = { "x-dreamwell-csrf": csrf };
  const token = sessionStorage.getItem("dreamwell-token");
  if (token) headers.authorization = "Bearer " + token;
  const init = { headers, method: body === undefined ? "GET" : "POST" };
  if (body !== undefined) { headers["content-type"] = "application/json"; init.body = JSON.stringify(body); }
  const response = await fetch(path, init);
  if (response.status === 401) { $("login").hidden = false; throw new ApiError("sign in with a bearer token", 401, {}); }
  const data = await response.json();
  if (!response.ok) throw new ApiError(data.error || response.statusText, response.status, data);
  return data;
}

// Each drawing asks for a turn; an older request answering late must not draw over a newer one.
const turns = {};
function turn(name) {
  const mine = (turns[name] = (turns[name] || 0) + 1);
  return () => turns[name] === mine;
}

function when(iso) { return iso ? iso.slice(0, 16).replace("T", " ") : ""; }
function ago(iso) {
  const s = (Date.now() - Date.parse(iso)) / 1000;
  if (s < 90) return "just now";
  if (s < 5400) return plural(Math.round(s / 60), "minute", "minutes") + " ago";
  if (s < 129600) return plural(Math.round(s / 3600), "hour", "hours") + " ago";
  return plural(Math.round(s / 86400), "day", "days") + " ago";
}
const num = (x) => (typeof x === "number" ? x.toFixed(2) : x);

// ---- memories ---------------------------------------------------------------------------
const memories = { category: "", bare: false, limit: 200, stale: false, version: null };

function highlighted(text, query) {
  const p = el("p", undefined, "content");
  const words = (query || "").split(/\s+/).filter((w) => w.length > 1)
    .map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  if (!words.length) { p.textContent = text; return p; }
  const re = new RegExp(`(${words.join("|")})`, "gi");
  text.split(re).forEach((part, i) => p.append(i % 2 ? el("mark", part) : part));
  return p;
}

function field(dl, name, value) {
  if (value === null || value === undefined || value === "") return;
  dl.append(el("dt", name), el("dd", String(value)));
}

function fill(form, m) {
  form.content.value = m.content; form.category.value = m.category || "";
  form.tags.value = m.tags.join(", "); form.importance.value = m.importance;
}

// only what the person changed is sent, with the revision the form was filled from
function changes(form, m) {
  const out = { revision: m.revision };
  if (form.content.value !== m.content) out.content = form.content.value;
  if (form.category.value !== (m.category || "")) out.category = form.category.value;
  if (form.tags.value !== m.tags.join(", ")) out.tags = form.tags.value;
  if (Number(form.importance.value) !== m.importance) out.importance = form.importance.value;
  return out;
}

function card(m, query) {
  const li = $("card").content.firstElementChild.cloneNode(true);
  li.dataset.id = m.id;
  li.classList.toggle("archived", !m.live);
  li.querySelector(".content").replaceWith(highlighted(m.content, query));
  const chips = li.querySelector(".chips");
  chips.append(el("span", m.category || "uncategorised", "chip"));
  for (const t of m.tags) chips.append(el("span", "#" + t, "chip tag"));
  li.querySelector(".age").textContent = ago(m.created_at);
  li.querySelector(".age").title = "added " + when(m.created_at);
  const imp = li.querySelector(".imp");
  imp.setAttribute("aria-label", `importance ${num(m.importance)}`);
  imp.title = `importance ${num(m.importance)}`;
  imp.querySelector(".fill").style.width = `${Math.round(m.importance * 100)}%`;
  li.querySelector(".match").textContent = m.match !== undefined ? `match ${num(m.match)}` : "";
  const dl = li.querySelector(".fields");
  field(dl, "id", m.id);
  field(dl, "importance", num(m.importance));
  field(dl, "score", num(m.score));
  field(dl, "reinforced", m.reinforcement_count + "×");
  field(dl, "first seen", when(m.created_at));
  field(dl, "last seen", when(m.last_seen_at));
  field(dl, "merged from", m.metadata.merged_from);
  field(dl, "derived from", m.metadata.derived_from);
  field(dl, "archived", when(m.archived_at));
  const details = li.querySelector(".details");
  details.onclick = () => {
    dl.hidden = !dl.hidden; li.classList.toggle("open", !dl.hidden);
    details.setAttribute("aria-expanded", String(!dl.hidden));
  };
  const label = m.content.slice(0, 40);
  for (const b of li.querySelectorAll(".row-actions button")) b.setAttribute("aria-label", `${b.textContent}: ${label}`);
  li.querySelector(".archive").hidden = !m.live;
  li.querySelector(".restore").hidden = m.live;
  editor(li, m);
  li.querySelector(".archive").onclick = () => remove(li, m);
  li.querySelector(".restore").onclick = () => restore(m);
  return li;
}

function editor(li, m) {
  const form = li.querySelector(".editor");
  const conflict = li.querySelector(".conflict");
  const close = () => { form.hidden = true; conflict.hidden = true; delete li.dataset.editing; if (memories.stale) refresh(); };
  li.querySelector(".edit").onclick = () => {
    fill(form, m); form.hidden = false; li.dataset.editing = "1"; form.content.focus();
  };
  form.querySelector(".cancel").onclick = close;
  const save = async (body) => {
    try {
      await api(`/ui/api/memories/${m.id}/edit`, body);
      close(); status("Saved."); await refresh();
    } catch (error) { clash(li, m, form, error); }
  };
  form.onsubmit = (event) => { event.preventDefault(); save(changes(form, m)); };
  li.saveAs = save;
}

// an edit refused because the memory moved (409) or is gone (404): say so, keep the text
function clash(li, m, form, error) {
  const box = li.querySelector(".conflict");
  box.replaceChildren(el("p", error.message));
  box.hidden = false;
  if (error.code === 409 && error.data.current) {
    const theirs = error.data.current;
    box.append(el("p", "The text now stored:"), el("blockquote", theirs.content));
    const reload = el("button", "Reload theirs"), overwrite = el("button", "Overwrite with mine");
    reload.type = overwrite.type = "button";
    reload.onclick = () => { Object.assign(m, theirs); fill(form, m); box.hidden = true; status("Reloaded the stored text."); };
    overwrite.onclick = () => li.saveAs({ ...changes(form, theirs), revision: theirs.revision });
    box.append(el("div", undefined, "actions"));
    box.lastChild.append(reload, overwrite);
  } else if (error.data && error.data.gone) {
    const keep = el("button", "Save my text as a new memory"); keep.type = "button";
    keep.onclick = () => create({ content: form.content.value, category: form.category.value,
      tags: form.tags.value, importance: form.importance.value }).then(() => { delete li.dataset.editing; });
    box.append(keep);
  }
  const first = box.querySelector("button");
  if (first) first.focus();
}

async function remove(li, m) {
  try {
    const { memory } = await api(`/ui/api/memories/${m.id}/archive`, { revision: m.revision });
    status("Deleted.", () => restore(memory));
    await refresh();
  } catch (error) { status(error.message); }
}

async function restore(m) {
  try {
    await api(`/ui/api/memories/${m.id}/restore`, { revision: m.revision });
    status("Restored."); await refresh();
  } catch (error) { status(error.message); }
}

async function create(body) {
  const answer = await api("/ui/api/memories", body).catch((error) => { status(error.message); throw error; });
  status(answer.reinforced ? "Already known: the existing memory was reinforced." : "Saved a new memory.");
  refresh();
  return answer;
}

function tree(rows, bare) {
  const root = { kids: {}, n: 0 };
  for (const { category: path, count } of rows) {
    let node = root;
    root.n += count;
    for (const part of path.split("/")) {
      node = node.kids[part] = node.kids[part] || { kids: {}, n: 0 };
      node.n += count; // parents show the total of everything under them
    }
  }
  const button = (label, n, chosen, pick) => {
    const b = el("button"); b.type = "button";
    const count = el("span", String(n), "n");
    count.append(el("span", n === 1 ? " memory" : " memories", "sr"));
    b.append(el("span", label), count);
    b.setAttribute("aria-pressed", String(chosen));
    b.onclick = pick;
    return b;
  };
  const build = (node, prefix) => {
    const ul = el("ul");
    for (const name of Object.keys(node.kids).sort()) {
      const path = prefix ? prefix + "/" + name : name, kid = node.kids[name];
      const li = el("li");
      const b = button(name, kid.n, !memories.bare && path === memories.category, () => choose(path === memories.category ? "" : path, false));
      b.dataset.category = path;
      li.append(b);
      if (Object.keys(kid.kids).length) li.append(build(kid, path));
      ul.append(li);
    }
    return ul;
  };
  const all = el("li"), none = el("li");
  all.append(button("All memories", root.n + bare, !memories.category && !memories.bare, () => choose("", false)));
  none.append(button("uncategorised", bare, memories.bare, () => choose("", !memories.bare)));
  none.firstChild.dataset.category = "(none)";
  all.firstChild.dataset.category = "(all)";
  const active = document.activeElement;
  const focused = active && active.closest("#tree") ? active.dataset.category : null;
  $("tree").replaceChildren(all, ...build(root, "").children, none);
  if (focused) [...$("tree").querySelectorAll("button")].find((b) => b.dataset.category === focused)?.focus();
}

function choose(category, bare) {
  memories.category = category; memories.bare = bare; memories.limit = 200;
  $("category").value = category;
  refresh();
}

function counted(found) {
  const n = found.memories.length, what = ["memory", "memories"];
  if (found.total === null) return found.more ? `${plural(n, "match", "matches")} shown; more below the best` : plural(n, "match", "matches");
  if (found.more) return `${n} of ${plural(found.total, ...what)}`;
  return plural(n, ...what);
}

async function refresh() {
  const current = turn("list");
  try {
    memories.category = $("category").value;
    const query = $("q").value;
    const params = new URLSearchParams({ q: query, category: memories.category, tags: $("tags").value,
      archived: $("archived").value, limit: memories.limit, uncategorised: memories.bare ? "1" : "" });
    const [found, cats] = await Promise.all([api("/ui/api/memories?" + params), api("/ui/api/categories")]);
    if (!current()) return;
    tree(cats.categories, cats.uncategorised);
    overview();
    if ($("list").querySelector("[data-editing]")) {
      memories.stale = true; // never redraw under what a person is typing
      status("Memory changed elsewhere; the list refreshes when you finish editing.");
      return;
    }
    memories.stale = false;
    $("count").textContent = counted(found);
    $("list").replaceChildren(...found.memories.map((m) => card(m, query)));
    $("more").hidden = !found.more;
  } catch (error) { if (current()) status(error.message); }
}

async function overview() {
  const current = turn("overview");
  const o = await api("/ui/api/overview");
  if (!current()) return;
  const tile = (n, label) => { const d = el("div"); d.append(el("dt", label), el("dd", String(n))); return d; };
  $("tiles").replaceChildren(tile(o.live, o.live === 1 ? "live memory" : "live memories"),
    tile(o.archived, "archived"), tile(o.categories, o.categories === 1 ? "category" : "categories"),
    tile(o.vectors_pending, o.vectors_pending === 1 ? "vector pending" : "vectors pending"));
  const top = Math.max(1, ...o.added.map((d) => d.count));
  $("bars").replaceChildren(...o.added.map((d) => {
    const bar = el("span"); bar.style.height = `${(100 * d.count) / top}%`;
    bar.title = `${d.day}: ${plural(d.count, "memory", "memories")} added`; return bar;
  }));
  const d = o.last_dream;
  $("last-dream").textContent = d ? `Last dream ${when(d.started)}: ${d.summary}${d.undone ? " (undone)" : ""}` : "No dream yet.";
}

// live refresh: a cheap version number, polled while the page is visible
async function poll() {
  if (document.hidden) return;
  try {
    const { version } = await api("/ui/api/version");
    if (memories.version !== null && version !== memories.version) {
      await refresh();
      if (!$("view-dreams").hidden) views.dreams.show();
    }
    memories.version = version;
  } catch { /* shown by the next refresh */ }
}

function searched(event) { event.preventDefault(); memories.limit = 200; refresh(); }

// ---- dreams ---------------------------------------------------------------------------
function words(text) { return (text || "").split(/(\s+)/); }

function diffText(before, after) {
  // word-level longest common subsequence: enough for memory-sized texts
  const a = words(before), b = words(after);
  const m = a.map(() => new Array(b.length + 1).fill(0));
  m.push(new Array(b.length + 1).fill(0));
  for (let i = a.length - 1; i >= 0; i--)
    for (let j = b.length - 1; j >= 0; j--)
      m[i][j] = a[i] === b[j] ? m[i + 1][j + 1] + 1 : Math.max(m[i + 1][j], m[i][j + 1]);
  const out = el("span");
  let i = 0, j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) { out.append(a[i]); i++; j++; }
    else if (i < a.length && (j >= b.length || m[i + 1][j] >= m[i][j + 1])) { out.append(el("del", a[i])); i++; }
    else { out.append(el("ins", b[j])); j++; }
  }
  return out;
}

const SHOWN = ["content", "category", "tags", "importance", "score", "reinforcement_count",
  "last_seen_at", "archived_at", "metadata"];
const LABEL = { reinforcement_count: "reinforced", last_seen_at: "last seen", archived_at: "archived" };

function show(value) {
  if (value === null || value === undefined) return "";
  if (typeof value === "number") return Number.isInteger(value) ? String(value) : value.toFixed(2);
  if (typeof value === "string" && /^\d{4}-\d\d-\d\dT/.test(value)) return when(value);
  return typeof value === "object" ? JSON.stringify(value) : String(value);
}

function change(c, texts) {
  const box = el("div", undefined, "change");
  const who = (c.after || c.before);
  box.append(el("h3", `${c.kind}${c.note ? " — " + c.note : ""}`));
  box.append(el("p", who.content, "text"));
  if (c.sources.length) {
    const grid = el("div", undefined, "sources");
    for (const id of c.sources) grid.append(el("blockquote", texts[id] || `(${id})`));
    box.append(el("p", c.kind === "merge" ? "merged from:" : "merged into:"), grid);
  }
  const table = el("table", undefined, "diff");
  const head = table.insertRow();
  for (const t of ["field", "old → new"]) head.append(el("th", t));
  for (const key of SHOWN) {
    const before = show(c.before && c.before[key]), after = show(c.after && c.after[key]);
    if (before === after || key === "content" && !c.before) continue;
    const row = table.insertRow();
    row.insertCell().textContent = LABEL[key] || key;
    const cell = row.insertCell();
    if (key === "content" || key === "metadata" || key === "tags") cell.append(diffText(before, after));
    else cell.append(el("del", before || "—"), " → ", el("ins", after || "—"));
  }
  if (table.rows.length > 1) box.append(table);
  return box;
}

function report(r) {
  const title = el("h2", `${when(r.started)}${r.dry_run ? " (preview, nothing changed)" : ""}${r.undone ? " — undone" : ""}`);
  const items = [title];
  if (!r.dry_run && !r.undone) {
    const undo = el("button", "Undo this cycle"); undo.type = "button"; undo.id = "undo";
    undo.onclick = async () => {
      try { if (await shown(`/ui/api/dreams/${r.run}/undo`, {})) status("Undone."); await views.dreams.show(); }
      catch (error) { status(error.message); }
    };
    items.push(undo);
  }
  const texts = {};
  for (const p of r.passes) for (const c of p.changes) for (const e of [c.before, c.after]) if (e) texts[e.id] = texts[e.id] || e.content;
  for (const p of r.passes) {
    items.push(el("p", `${p.name}: ${p.status}${p.reason ? " (" + p.reason + ")" : ""}, ${plural(p.changes.length, "change", "changes")}`));
    items.push(...p.changes.map((c) => change(c, texts)));
  }
  $("report").replaceChildren(...items);
}

// a dream report, drawn unless another was asked for meanwhile; true when drawn
async function shown(path, body) {
  const current = turn("report");
  const answer = await api(path, body);
  if (current()) report(answer);
  return current();
}

async function dream(mode) {
  status(mode === "preview" ? "Planning a dream…" : "Dreaming…");
  try { if (await shown(`/ui/api/dream/${mode}`, {})) status("Done."); await views.dreams.show(); }
  catch (error) { status(error.message); }
}

// ---- views ----------------------------------------------------------------------------
const views = {
  memories: { show: refresh },
  dreams: {
    async show() {
      const current = turn("runs");
      try {
        const data = await api("/ui/api/dreams");
        if (!current()) return;
        $("runs").replaceChildren(...data.dreams.map((d) => {
          const li = el("li"), b = el("button", undefined, "run"); b.type = "button";
          b.append(when(d.started), el("small", `${d.summary}${d.dry_run ? " · preview" : ""}${d.undone ? " · undone" : ""}`));
          b.onclick = async () => { try { await shown(`/ui/api/dreams/${d.run}`); } catch (e) { status(e.message); } };
          li.append(b); return li;
        }));
      } catch (error) { status(error.message); }
    },
  },
};

function view(name) {
  if (!views[name]) name = "memories";
  for (const panel of document.querySelectorAll("[data-panel]")) panel.hidden = panel.dataset.panel !== name;
  for (const b of $("views").querySelectorAll("button")) {
    if (b.dataset.view === name) b.setAttribute("aria-current", "page"); else b.removeAttribute("aria-current");
  }
  if (location.hash !== "#" + name) history.replaceState(null, "", "#" + name);
  views[name].show();
}

for (const b of $("views").querySelectorAll("button")) b.onclick = () => view(b.dataset.view);
$("search").onsubmit = searched;
$("archived").onchange = searched;
$("more").onclick = () => { memories.limit += 200; refresh(); };
$("new").onclick = () => {
  const form = $("create"); form.hidden = !form.hidden;
  $("new").setAttribute("aria-expanded", String(!form.hidden));
  if (!form.hidden) form.content.focus();
};
$("create").querySelector(".cancel").onclick = () => { $("create").hidden = true; $("new").setAttribute("aria-expanded", "false"); };
$("create").onsubmit = async (event) => {
  event.preventDefault();
  const f = $("create");
  try {
    await create({ content: f.content.value, category: f.category.value, tags: f.tags.value, importance: f.importance.value });
    f.reset(); f.hidden = true; $("new").setAttribute("aria-expanded", "false");
  } catch { /* the status says why; the text stays */ }
};
$("preview").onclick = () => dream("preview");
$("apply").onclick = () => dream("apply");
$("login").onsubmit = (event) => {
  event.preventDefault();
  sessionStorage.setItem("dreamwell-token", $("token").value);
  $("login").hidden = true; status(""); view(location.hash.slice(1));
};
if (matchMedia("(max-width: 720px)").matches) $("cats").open = false;
view(location.hash.slice(1));
setInterval(poll, 2000);
poll();
