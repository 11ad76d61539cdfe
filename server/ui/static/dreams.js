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
  const out = el("span"), ops = [];
  let i = 0, j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) { ops.push(["", a[i]]); i++; j++; }
    else if (i < a.length && (j >= b.length || m[i + 1][j] >= m[i][j + 1])) { ops.push(["del", a[i]]); i++; }
    else { ops.push(["ins", b[j]]); j++; }
  }
  // one <del> or <ins> per run of removed or added words (the spaces between them included)
  let run = null;
  for (const [op, text] of ops) {
    const joins = run && (op === run.tag || (/^\s+$/.test(text) && op));
    if (joins) { run.node.textContent += text; continue; }
    if (op) { run = { tag: op, node: el(op, text) }; out.append(run.node); }
    else { run = null; out.append(text); }
  }
  return out;
}

// a memory's fields as a change shows them: numbers rounded as `dreamwell dream` prints
// them (importance 0.62, score +0.10), times as "2026-11-26 03:14", tags as "#a #b"
const SHOWN = ["content", "category", "tags", "importance", "score", "reinforcement_count",
  "last_seen_at", "last_used_at", "archived_at", "metadata"];
const NEW_SHOWN = ["category", "tags", "importance", "score", "reinforcement_count", "metadata"];
const LABEL = { reinforcement_count: "reinforced", last_seen_at: "last seen", last_used_at: "last used",
  archived_at: "archived", see_also: "see also", created_at: "created" };
const FORMAT = {
  importance: (v) => fixed(v),
  score: (v) => (v < 0 ? "" : "+") + fixed(v),
  reinforcement_count: (v) => `${v}×`,
  tags: (v) => v.map((t) => "#" + t).join(" "),
  see_also: (v) => v.join(", "),
  pinned: (v) => (v ? "yes" : "no"),
  metadata: (v) => Object.entries(v).map(([k, x]) => `${k}: ${x}`).join("; "),
};

function show(key, value) {
  if (value === null || value === undefined) return "";
  if (FORMAT[key]) return FORMAT[key](value);
  if (typeof value === "number") return Number.isInteger(value) ? String(value) : fixed(value);
  if (typeof value === "string" && /^\d{4}-\d\d-\d\dT/.test(value)) return when(value);
  return typeof value === "object" ? JSON.stringify(value) : String(value);
}

// one row of a change: "old → new"; a side that did not exist is "—" (a created memory or
// skill has only new values); long texts are diffed word by word
function diffRow(table, key, before, after, text) {
  const row = table.insertRow();
  row.dataset.field = key;
  row.insertCell().textContent = LABEL[key] || key;
  const cell = row.insertCell();
  if (key === "SKILL.md") cell.className = "md";
  const none = () => el("span", "—", "none");
  if (text && before && after) cell.append(diffText(before, after));
  else cell.append(before ? el("del", before) : none(), " → ", after ? el("ins", after) : none());
}

function diffTable(rows) {
  const table = el("table", undefined, "diff");
  const head = table.insertRow();
  for (const t of ["field", "old → new"]) head.append(el("th", t));
  for (const [key, before, after, text] of rows) diffRow(table, key, before, after, text);
  return table.rows.length > 1 ? [table] : [];
}

// what the sources of a change are to it, by kind (and, for archives, why)
function sourcesLabel(c) {
  if (c.kind === "merge") return "merged from:";
  if (c.kind === "derived") return "derived from:";
  if (c.kind === "skill-merge") return "merged from:";
  if (c.kind === "skill-archive") return "merged into:";
  if (c.kind === "skill-guide") return "a guide to:";
  if (c.note === "superseded") return "superseded by:";
  if (c.note === "merged") return "merged into:";
  if (c.note.startsWith("covered by")) return "covered by:";
  return "related:";
}

function sources(c, texts) {
  // a skill's own name is no source of it (but a merge's base is one of the texts merged);
  // skill-create's sources are sessions its note names
  const self = c.kind === "skill-merge" ? null : (c.skill_after || c.skill_before || {}).name;
  const ids = c.kind === "skill-create" ? [] : c.sources.filter((id) => id !== self);
  if (!ids.length) return [];
  if (c.kind === "anti-pattern") return [el("p", `learnt from sessions: ${ids.join(", ")}`, "from")];
  const grid = el("div", undefined, "sources");
  for (const id of ids) {
    const quote = el("blockquote");
    if (c.kind.startsWith("skill-")) quote.append(el("cite", id)); // a skill: its name, its body
    quote.append(texts[id] || `(${id})`);
    quote.dataset.source = id;
    grid.append(quote);
  }
  return [el("p", sourcesLabel(c), "from"), grid];
}

function memoryRows(c) {
  if (!c.before) return NEW_SHOWN.map((k) => [k, "", show(k, c.after[k])]).filter((r) => r[2]);
  const rows = [];
  for (const key of SHOWN) {
    const before = show(key, c.before[key]), after = show(key, c.after && c.after[key]);
    if (before !== after) rows.push([key, before, after, key === "content" || key === "metadata"]);
  }
  return rows;
}

// a skill change (kind skill-*) holds the skill's whole records: its SKILL.md is diffed as text
const SKILL_SHOWN = ["SKILL.md", "status", "pinned", "see_also", "created_at"];

function skillField(record, key) {
  if (!record) return undefined;
  if (key !== "SKILL.md") return record[key];
  return record.files ? (record.files["SKILL.md"] || {}).text : record["SKILL.md"];
}

function skillRows(c) {
  const b = c.skill_before, a = c.skill_after, rows = [];
  for (const key of SKILL_SHOWN) {
    if (!b && (key === "created_at" || (key === "pinned" && !skillField(a, key)))) continue;
    const before = show(key, skillField(b, key)), after = show(key, skillField(a, key));
    if (before !== after) rows.push([key, before, after, key === "SKILL.md" || key === "see_also"]);
  }
  return rows;
}

function skillChange(c, texts = {}) {
  const box = el("div", undefined, "change");
  box.dataset.kind = c.kind;
  const b = c.skill_before, a = c.skill_after;
  box.append(el("h3", `${c.kind} [${(a || b).name}]${c.note ? " — " + c.note : ""}`));
  box.append(...sources(c, texts), ...diffTable(skillRows(c)));
  return box;
}

function change(c, texts) {
  if (c.kind.startsWith("skill-")) return skillChange(c, texts);
  const box = el("div", undefined, "change");
  box.dataset.kind = c.kind;
  box.append(el("h3", `${c.kind}${c.note ? " — " + c.note : ""}`));
  box.append(el("p", (c.after || c.before).content, "text"));
  box.append(...sources(c, texts), ...diffTable(memoryRows(c)));
  return box;
}

// the texts of every memory and skill the report names: its own images, then what the
// server looked up for sources the report does not hold
function reportTexts(r) {
  const texts = { ...(r.texts || {}) };
  for (const p of r.passes) for (const c of p.changes) {
    for (const e of [c.before, c.after]) if (e) texts[e.id] = texts[e.id] || e.content;
    for (const s of [c.skill_before, c.skill_after]) {
      const md = skillField(s, "SKILL.md") || "";
      if (s && !texts[s.name]) texts[s.name] = md.replace(/^---\n[\s\S]*?\n---\n+/, "");
    }
  }
  return texts;
}

// passes that ran and changed nothing share one line, so the changes stand out
function quietPasses(passes) {
  const said = passes.filter((p) => p.status === "ran").map((p) => p.name);
  return said.length ? [el("p", `Nothing changed by: ${said.join("; ")}`, "quiet")] : [];
}

// first what ran, then what was skipped and why (the reason names the setting to add),
// passes skipped for one reason on one line
function ranAndSkipped(passes, configure) {
  const ran = passes.filter((p) => p.status === "ran").map((p) => p.name);
  const skipped = new Map();
  for (const p of passes.filter((p) => p.status !== "ran")) {
    const why = p.reason || p.status;
    skipped.set(why, [...(skipped.get(why) || []), p.name]);
  }
  const lines = [el("p", ran.length ? `Ran: ${ran.join(", ")}.` : "No pass ran.", "ran")];
  for (const [why, names] of skipped) {
    const fix = configure && why.startsWith("no LLM") ? `. To run them: ${configure}` : "";
    lines.push(el("p", `Skipped ${names.join(", ")} — ${why}${fix}`, "skipped"));
  }
  return lines;
}

// what passes that changed nothing noted (usage counts and the like), folded away
function quietNotes(passes) {
  const noted = passes.filter((p) => !p.changes.length && p.notes.length);
  if (!noted.length) return [];
  const box = el("details", undefined, "notes");
  box.append(el("summary", "Notes"));
  const list = el("ul");
  for (const p of noted) for (const n of p.notes.slice(0, 20)) list.append(el("li", `${p.name}: ${n}`));
  box.append(list);
  return [box];
}

function report(r) {
  const state = `${r.dry_run ? " (preview, nothing changed)" : ""}${r.undone ? " — undone" : ""}`;
  const items = [el("h2", `${when(r.started)}${state}`)];
  if (r.summary) items.push(el("p", r.dry_run ? `Would change: ${r.summary}` : r.summary, "summary"));
  items.push(...ranAndSkipped(r.passes, r.configure_llm));
  if (r.spend) items.push(el("p", `LLM: ${r.spend}`, "spend"));
  if (!r.dry_run && !r.undone) {
    const undo = el("button", "Undo this cycle"); undo.type = "button"; undo.id = "undo";
    undo.onclick = async () => {
      try { if (await shown(`/ui/api/dreams/${r.run}/undo`, {})) status("Undone."); await runs(); }
      catch (error) { status(error.message); }
    };
    items.push(undo);
  }
  const texts = reportTexts(r);
  const busy = r.passes.filter((p) => p.changes.length); // no "0 changes" blocks
  for (const p of busy) {
    const head = el("h3", `${p.name}: ${plural(p.changes.length, "change", "changes")}`, "pass");
    items.push(head, ...p.changes.map((c) => change(c, texts)));
    if (p.notes.length) {
      const notes = el("ul", undefined, "notes");
      for (const n of p.notes.slice(0, 20)) notes.append(el("li", n));
      items.push(notes);
    }
  }
  items.push(...quietPasses(r.passes.filter((p) => !busy.includes(p))));
  items.push(...quietNotes(r.passes));
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
    $("runs-box").querySelector("summary").textContent = `Runs (${data.dreams.length})`;
    // nothing read yet: the newest run's report, so the view never opens empty
    if (!$("report").childElementCount && data.dreams.length) await shown(`/ui/api/dreams/${data.dreams[0].run}`);
  } catch (error) { status(error.message); }
}

// a hook's activity changes no dream run
const dreamsMoved = (visible, moved) => visible && moved.some((k) => k !== "hooks");
views.dreams = { show: runs, changed: (visible, moved) => (dreamsMoved(visible, moved) ? runs() : undefined) };
if (matchMedia("(max-width: 720px)").matches) $("runs-box").open = false; // a phone: the report first
$("preview").onclick = () => dream("preview");
$("apply").onclick = () => dream("apply");
