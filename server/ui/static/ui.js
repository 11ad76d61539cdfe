// dreamwell memory browser: plain JavaScript, no build step, nothing from the network.
// This file is what every view shares (the API, the status line, the view switcher, live
// refresh). Each view is its own file that registers itself in `views` with `show()` (drawn
// when chosen) and `changed(visible, moved)` (something moved elsewhere: "version" for
// memories, "skills", "hooks" for the client hooks' activity): memories.js, dreams.js, skills.js. A new
// view is one button in <nav id="views">, one <section data-panel> in ui.html, one script.
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
// x with d decimals as the CLI (Python's format) prints it: toFixed breaks an exact tie
// (0.625, representable in binary) upwards, Python to the even digit ("0.62")
function fixed(x, d = 2) {
  const long = Math.abs(x).toFixed(100), cut = long.indexOf(".") + 1 + d; // exact digits
  if (!/^50*$/.test(long.slice(cut)) || Number(long[cut - 1]) % 2) return x.toFixed(d);
  return (x < 0 ? "-" : "") + long.slice(0, cut);
}
const num = (x) => (typeof x === "number" ? fixed(x) : x);

// ---- views ----------------------------------------------------------------------------
const views = {};
let version = null; // the last answer of /ui/api/version

function view(name) {
  if (!views[name]) name = "memories";
  for (const panel of document.querySelectorAll("[data-panel]")) panel.hidden = panel.dataset.panel !== name;
  for (const b of $("views").querySelectorAll("button")) {
    if (b.dataset.view === name) b.setAttribute("aria-current", "page"); else b.removeAttribute("aria-current");
  }
  if (location.hash !== "#" + name) history.replaceState(null, "", "#" + name);
  views[name].show();
}

// live refresh: a cheap version number, polled while the page is visible
async function poll() {
  if (document.hidden) return;
  try {
    // memories' log, skills' generation, the client hooks' files: which of them moved
    const answer = await api("/ui/api/version");
    for (const v of Object.values(views)) if (v.polled) v.polled(answer); // e.g. an import's progress
    const moved = version === null ? [] : ["version", "skills", "hooks"].filter((k) => answer[k] !== version[k]);
    version = answer;
    if (!moved.length) return;
    for (const [name, v] of Object.entries(views)) {
      if (v.changed) await v.changed(!$("view-" + name).hidden, moved);
    }
  } catch { /* shown by the next refresh */ }
}

function start() {
  for (const b of $("views").querySelectorAll("button")) b.onclick = () => view(b.dataset.view);
  $("login").onsubmit = (event) => {
    event.preventDefault();
    sessionStorage.setItem("dreamwell-token", $("token").value);
    $("login").hidden = true; status(""); view(location.hash.slice(1));
  };
  view(location.hash.slice(1));
  setInterval(poll, 2000);
  poll();
}
document.addEventListener("DOMContentLoaded", start); // after every view's script ran
