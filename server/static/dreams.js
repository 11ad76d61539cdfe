// dreamwell memory browser: the Dreams view (runs, reports read as diffs, preview, dream
// now, undo). Shared helpers come from ui.js.
"use strict";
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

// a skill change (kind skill-*) holds the skill's whole records: its SKILL.md is diffed as text
const SKILL_SHOWN = ["SKILL.md", "status", "pinned", "see_also", "created_at"];

function skillField(record, key) {
  if (!record) return undefined;
  if (key !== "SKILL.md") return record[key];
  return record.files ? (record.files["SKILL.md"] || {}).text : record["SKILL.md"];
}

function skillChange(c) {
  const box = el("div", undefined, "change");
  const b = c.skill_before, a = c.skill_after;
  const from = c.sources.length ? ` from ${c.sources.join(", ")}` : "";
  box.append(el("h3", `${c.kind} [${(a || b).name}]${from}${c.note ? " — " + c.note : ""}`));
  const table = el("table", undefined, "diff");
  const head = table.insertRow();
  for (const t of ["field", "old → new"]) head.append(el("th", t));
  for (const key of SKILL_SHOWN) {
    const before = show(skillField(b, key)), after = show(skillField(a, key));
    if (before === after) continue;
    const row = table.insertRow();
    row.insertCell().textContent = key;
    const cell = row.insertCell();
    if (key === "SKILL.md") cell.className = "md";
    if (key === "SKILL.md" || key === "see_also") cell.append(diffText(before, after));
    else cell.append(el("del", before || "—"), " → ", el("ins", after || "—"));
  }
  if (table.rows.length > 1) box.append(table);
  return box;
}

function change(c, texts) {
  if (c.kind.startsWith("skill-")) return skillChange(c);
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
      try { if (await shown(`/ui/api/dreams/${r.run}/undo`, {})) status("Undone."); await runs(); }
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
  try { if (await shown(`/ui/api/dream/${mode}`, {})) status("Done."); await runs(); }
  catch (error) { status(error.message); }
}

async function runs() {
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
}

// a hook's activity changes no dream run
const dreamsMoved = (visible, moved) => visible && moved.some((k) => k !== "hooks");
views.dreams = { show: runs, changed: (visible, moved) => (dreamsMoved(visible, moved) ? runs() : undefined) };
$("preview").onclick = () => dream("preview");
$("apply").onclick = () => dream("apply");
