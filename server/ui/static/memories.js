// dreamwell memory browser: the Memories view (list, search, categories, overview, edit,
// create, delete with Undo). Shared helpers come from ui.js.
"use strict";
// ---- memories ---------------------------------------------------------------------------
const memories = { category: "", bare: false, limit: 200, stale: false };

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
  chips.append(el("span", m.category || "uncategorized", "chip"));
  if (m.metadata.project) {
    const own = el("span", m.metadata.project_name || m.metadata.project, "chip project");
    own.title = "project " + m.metadata.project;
    chips.append(own);
  }
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
  form.onkeydown = (event) => { if (event.key === "Escape") { close(); li.querySelector(".edit").focus(); } };
  const save = async (body) => {
    try {
      const { memory } = await api(`/ui/api/memories/${m.id}/edit`, body);
      Object.assign(m, memory);  // its new revision: a delete before the list reloads is not stale
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
  none.append(button("uncategorized", bare, memories.bare, () => choose("", !memories.bare)));
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

// the project filter's choices: every project, global, then each project with its count
function projectChoices(projects, global) {
  const select = $("project");
  const chosen = select.value;
  const options = [new Option("every project", ""), new Option(`global (${global})`, "(global)")];
  for (const p of projects) {
    const option = new Option(`${p.name} (${p.count})`, p.project);
    option.title = p.project;
    options.push(option);
  }
  select.replaceChildren(...options);
  select.value = [...select.options].some((o) => o.value === chosen) ? chosen : "";
}

async function refresh() {
  const current = turn("list");
  try {
    memories.category = $("category").value;
    const query = $("q").value;
    const params = new URLSearchParams({ q: query, category: memories.category, tags: $("tags").value,
      archived: $("archived").value, limit: memories.limit, uncategorised: memories.bare ? "1" : "",
      project: $("project").value });
    const [found, cats] = await Promise.all([api("/ui/api/memories?" + params), api("/ui/api/categories")]);
    if (!current()) return;
    tree(cats.categories, cats.uncategorised);
    projectChoices(cats.projects || [], cats.global || 0);
    overview().catch(() => {}); // the list's own errors are the ones worth a status
    if ($("list").querySelector("[data-editing]")) {
      memories.stale = true; // never redraw under what a person is typing
      status("Memory changed elsewhere; the list refreshes when you finish editing.");
      return;
    }
    memories.stale = false;
    $("count").textContent = found.empty ? "Nothing stored yet." : counted(found);
    $("empty-store").hidden = !found.empty; // how memories arrive, not "0 matches"
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
  hooks(o.hooks);
}

// what the client hooks (dreamwell hook, run by Claude Code and the like) did in the last day
function hooks(h) {
  const box = $("hooks");
  if (!h.sessions && !h.failures) {
    box.replaceChildren(el("p", h.last_run ? `No client hook in the last 24 hours (last ${ago(h.last_run)}).` : "No client hook has run yet."));
    return;
  }
  const open = box.querySelector("details")?.open || false, focused = box.contains(document.activeElement);
  const details = el("details"), summary = el("summary");
  summary.append(`Client hooks, last 24 h: ${plural(h.sessions, "session", "sessions")}, ` +
    `${plural(h.recalls, "prompt", "prompts")} recalled for, ${plural(h.memories, "memory", "memories")} fed in, `,
  el("span", plural(h.failures, "failure", "failures"), h.failures ? "bad" : ""));
  if (h.last_run) summary.append(` · last ${ago(h.last_run)}`);
  details.open = open;
  details.append(summary, ...h.warnings.map((w) => el("p", w, "bad")));
  const rows = el("ul");
  for (const s of h.recent) {
    rows.append(el("li", `${s.client} ${s.session.slice(0, 12)}${s.cwd ? " in " + s.cwd : ""}: ` +
      `${plural(s.turns, "turn", "turns")} recorded, recalled for ${plural(s.recalls, "prompt", "prompts")}, ` +
      `${plural(s.memories, "memory", "memories")} fed in, ${ago(s.last)}`));
  }
  if (h.sessions > h.recent.length) rows.append(el("li", `… ${h.sessions - h.recent.length} more`));
  // a hooks.log line: "<ISO time> <event> failed: <why>"
  const failure = (line) => { const [stamp, ...rest] = line.split(" "); return el("p", `${when(stamp)} ${rest.join(" ")}`, "bad"); };
  details.append(rows, ...h.last_failures.map(failure));
  box.replaceChildren(details);
  if (focused) summary.focus(); // a refresh under the keyboard keeps its place
}

// an import running in another process (`dreamwell import`): how far it got, until it ends
function importing(job) {
  const line = $("importing"), n = (x) => x.toLocaleString("en");
  line.hidden = !job;
  line.textContent = job ? `Importing: ${n(job.done)} of ${n(job.total)} ${job.total === 1 ? "memory" : "memories"} written…` : "";
}

function searched(event) { event.preventDefault(); memories.limit = 200; refresh(); }


views.memories = {
  show: refresh,
  polled: (answer) => importing(answer.importing),
  // the memories moved: the list and the overview; only the hooks ran: the overview alone
  changed: (visible, moved) => (moved.includes("version") ? refresh()
    : moved.includes("hooks") ? overview().catch(() => {}) : undefined),
};
$("search").onsubmit = searched;
$("archived").onchange = searched;
$("project").onchange = searched;
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
if (matchMedia("(max-width: 720px)").matches) $("cats").open = false;
