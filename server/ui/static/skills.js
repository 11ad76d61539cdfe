// dreamwell memory browser: the Skills view (list with uses, read SKILL.md, edit with
// compare-and-set, approve or reject candidates, pin, archive/restore, the dream's history of
// each skill). Shared helpers come from ui.js; skillChange (a dream's skill diff) from dreams.js.
"use strict";
const skills = { chosen: null, stale: false };

function usage(s) {
  const uses = plural(s.uses_30d || 0, "use", "uses") + " in 30 days";
  return `${s.status}${s.pinned ? " · pinned" : ""} · ${uses} · ${s.last_used ? "last used " + ago(s.last_used) : "never used"}`;
}

async function skillList() {
  const current = turn("skills");
  try {
    const found = await api("/ui/api/skills?" + new URLSearchParams({ status: $("skill-status").value }));
    if (!current()) return;
    const c = found.counts;
    $("skill-count").textContent = `${plural(c.active, "active skill", "active skills")}, ${plural(c.candidate, "candidate", "candidates")}, ${c.archived} archived`;
    $("skills").replaceChildren(...found.skills.map((s) => {
      const li = el("li"), b = el("button", undefined, "run"); b.type = "button";
      b.dataset.name = s.name;
      b.setAttribute("aria-pressed", String(s.name === skills.chosen));
      b.append(s.name, el("small", usage(s)));
      b.onclick = async () => {
        skills.chosen = s.name; skillList(); await skillDetail();
        if (matchMedia("(max-width: 720px)").matches) $("skill").scrollIntoView(); // a phone: below the list
      };
      li.append(b); return li;
    }));
  } catch (error) { if (current()) status(error.message); }
}

function skillActions(s) {
  const out = el("div", undefined, "actions");
  const add = (label, action, cls) => {
    const b = el("button", label, cls); b.type = "button";
    b.onclick = () => act(s, action, { revision: s.revision });
    out.append(b);
  };
  const edit = el("button", "Edit", "edit"); edit.type = "button";
  edit.onclick = () => openEditor(s);
  out.append(edit);
  if (s.status === "candidate") { add("Approve", "approve", "approve"); add("Reject", "reject", "reject"); }
  add(s.pinned ? "Unpin" : "Pin", s.pinned ? "unpin" : "pin", "pin");
  if (s.status === "archived") add("Restore", "restore", "restore");
  else if (s.status === "active") add("Archive", "archive", "archive");
  return out;
}

const DONE = { approve: "Approved.", reject: "Rejected (archived).", pin: "Pinned.", unpin: "Unpinned.",
  archive: "Archived.", restore: "Restored.", edit: "Saved." };

async function act(s, action, body) {
  try {
    const { skill } = await api(`/ui/api/skills/${encodeURIComponent(s.name)}/${action}`, body);
    Object.assign(s, skill);  // its new revision: a button clicked before the redraw is not stale
    delete $("skill").dataset.editing;
    status(DONE[action]);
    await Promise.all([skillList(), skillDetail()]);
  } catch (error) { skillClash(s, error); }
}

// a change refused because the skill moved (409) or is gone (404): say so, keep the text
function skillClash(s, error) {
  const box = $("skill").querySelector(".conflict");
  box.replaceChildren(el("p", error.message));
  box.hidden = false;
  if (error.code === 409 && error.data.current) {
    const theirs = error.data.current, form = $("skill").querySelector(".editor");
    box.append(el("p", "The SKILL.md now stored:"), el("blockquote", theirs.skill_md));
    const row = el("div", undefined, "actions");
    const reload = el("button", "Reload theirs"); reload.type = "button";
    reload.onclick = () => { delete $("skill").dataset.editing; skillDetail(); };
    row.append(reload);
    if (!form.hidden) {
      const overwrite = el("button", "Overwrite with mine"); overwrite.type = "button";
      overwrite.onclick = () => act(theirs, "edit", { skill_md: form.skill_md.value, revision: theirs.revision });
      row.append(overwrite);
    }
    box.append(row);
    box.querySelector("button").focus();
  }
}

function openEditor(s) {
  const form = $("skill").querySelector(".editor");
  form.skill_md.value = s.skill_md; form.hidden = false;
  $("skill").querySelector("pre.skill-md").hidden = true; // the text is in the editor
  $("skill").dataset.editing = "1"; form.skill_md.focus();
}

function skillEditor(s) {
  const form = el("form", undefined, "editor"); form.hidden = true;
  form.setAttribute("aria-label", `Edit ${s.name}`);
  const label = el("label", "SKILL.md"), text = el("textarea"); text.name = "skill_md"; text.rows = 16;
  label.append(text);
  const row = el("div", undefined, "actions");
  const save = el("button", "Save"), cancel = el("button", "Cancel", "cancel");
  save.type = "submit"; cancel.type = "button";
  row.append(save, cancel); form.append(label, row);
  const close = () => {
    form.hidden = true; delete $("skill").dataset.editing;
    $("skill").querySelector("pre.skill-md").hidden = false;
    if (skills.stale) skillDetail();
  };
  cancel.onclick = close;
  form.onkeydown = (event) => { if (event.key === "Escape") close(); };
  form.onsubmit = (event) => { event.preventDefault(); act(s, "edit", { skill_md: text.value, revision: s.revision }); };
  return form;
}

function skillHistory(changes) {
  const box = el("section", undefined, "history"); box.setAttribute("aria-label", "History");
  box.append(el("h3", "History of dream changes"));
  if (!changes.length) box.append(el("p", "The dream has not changed this skill.", "hint"));
  for (const c of changes) {
    const d = el("details"), summary = el("summary");
    summary.textContent = `${when(c.started)} ${c.kind}${c.note ? " — " + c.note : ""}${c.undone ? " (undone)" : ""}`;
    d.append(summary, skillChange(c));
    box.append(d);
  }
  return box;
}

async function skillDetail() {
  const name = skills.chosen, current = turn("skill");
  if (!name) return;
  if ($("skill").dataset.editing) { skills.stale = true; return; }
  try {
    const { skill: s, history } = await api(`/ui/api/skills/${encodeURIComponent(name)}`);
    if (!current() || $("skill").dataset.editing) return;
    skills.stale = false;
    const dl = el("dl", undefined, "fields");
    const field = (k, v) => { if (v !== null && v !== undefined && v !== "") dl.append(el("dt", k), el("dd", String(v))); };
    field("uses", plural(s.uses_30d, "use", "uses") + " in 30 days");
    field("last used", s.last_used ? when(s.last_used) : "never");
    field("origin", s.origin); field("revision", s.revision);
    field("created", when(s.created_at)); field("updated", when(s.updated_at));
    field("files", s.files.join(", ")); field("see also", s.see_also.join(", "));
    const title = el("h2", s.name), badges = el("p");
    badges.append(el("span", s.status, "badge " + s.status), s.pinned ? el("span", "pinned", "badge") : "");
    const conflict = el("div", undefined, "conflict"); conflict.hidden = true; conflict.setAttribute("role", "alert");
    $("skill").replaceChildren(title, badges, el("p", s.description, "desc"), skillActions(s), conflict,
      skillEditor(s), el("pre", s.skill_md, "skill-md"), dl, skillHistory(history));
  } catch (error) {
    if (!current()) return;
    status(error.message);
    if (error.code === 404) { skills.chosen = null; $("skill").replaceChildren(el("p", error.message, "hint")); }
  }
}

views.skills = {
  show: () => { skillList(); skillDetail(); },
  changed: (visible) => (visible ? Promise.all([skillList(), skillDetail()]) : undefined),
};
$("skill-status").onchange = skillList;
