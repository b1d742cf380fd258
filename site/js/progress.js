// The reader's exercise progress, kept in this browser only (localStorage; nothing is sent anywhere).
// One JSON object under KEY: { "<exercise id>": { done, at, hints, solution, prediction, close } }.
//   done: the exercise was solved (a code check passed, or a prediction was committed and checked)
//   hints: how many hints were opened; solution: the solution was opened (and when)
//   prediction / close: a predict exercise's committed number, and whether it was within tolerance
// Where localStorage is unavailable (a private mode that blocks it), progress lasts for the visit.
//
// Also: the marks it drives on any page. A chapter's contents (sidebar and top) mark each solved
// exercise's heading; the index shows "n of m done" per chapter ([data-exercises] on its list items)
// and can reset everything.

const KEY = "course-exercises-v1";
let memory = {}; // the fallback store, and the cache of the stored object

function read() {
  try {
    const raw = globalThis.localStorage?.getItem(KEY);
    const parsed = raw ? JSON.parse(raw) : {};
    memory = parsed && typeof parsed === "object" && !Array.isArray(parsed) ? parsed : {};
  } catch {
    // unreadable (blocked, or not JSON): keep what this visit has
  }
  return memory;
}

function write(all) {
  memory = all;
  try {
    globalThis.localStorage?.setItem(KEY, JSON.stringify(all));
  } catch {
    // full or blocked: the visit keeps it in memory
  }
  window.dispatchEvent(new CustomEvent("exercise-progress"));
}

export function get(id) {
  const entry = read()[id];
  return entry && typeof entry === "object" ? entry : {};
}

export function update(id, changes) {
  const all = read();
  all[id] = { ...get(id), ...changes };
  write(all);
  return all[id];
}

/** Forget the progress of these exercise ids (all of them when ids is null). */
export function reset(ids = null) {
  const all = read();
  if (ids === null) write({});
  else {
    for (const id of ids) delete all[id];
    write(all);
  }
}

export const isDone = (id) => get(id).done === true;

/**
 * Ask before forgetting, in the page (not window.confirm, which blocks the page and some browsers
 * suppress): the button is replaced by the question and two buttons; Keyboard focus moves to "Keep",
 * and back to the button after either answer.
 */
export function confirmReset(button, question, onYes) {
  const box = document.createElement("span");
  box.className = "exercise-confirm";
  box.setAttribute("role", "group");
  box.setAttribute("aria-label", question);
  const words = document.createElement("span");
  words.textContent = question;
  const yes = document.createElement("button");
  yes.type = "button";
  yes.dataset.role = "confirm-reset";
  yes.textContent = "Yes, forget it";
  const no = document.createElement("button");
  no.type = "button";
  no.dataset.role = "keep";
  no.textContent = "Keep it";
  box.append(words, " ", yes, " ", no);
  button.hidden = true;
  button.after(box);
  const home = button.parentElement;
  const done = (confirmed) => {
    box.remove();
    button.hidden = false;
    if (confirmed) onYes(); // may hide the button again: nothing left to forget
    if (!button.hidden) button.focus();
    else {
      home.setAttribute("tabindex", "-1");
      home.focus();
    }
  };
  yes.addEventListener("click", () => done(true));
  no.addEventListener("click", () => done(false));
  box.addEventListener("keydown", (event) => {
    if (event.key === "Escape") done(false);
  });
  no.focus();
}

// ---------------------------------------------------------------------------
// Marks: a chapter's contents, and the index

function mark(link, done) {
  let tick = link.querySelector(".exercise-tick");
  if (done && !tick) {
    tick = document.createElement("span");
    tick.className = "exercise-tick";
    tick.textContent = " ✓";
    const words = document.createElement("span");
    words.className = "visually-hidden";
    words.textContent = " (done)";
    tick.append(words);
    link.append(tick);
  } else if (!done && tick) tick.remove();
}

/** Tick each solved exercise's entry in the page's contents ([data-exercise] blocks after a heading). */
export function markContents() {
  for (const block of document.querySelectorAll("[data-exercise]")) {
    const heading = block.previousElementSibling?.matches("h3[id]") ? block.previousElementSibling : null;
    if (!heading) continue;
    const href = `#${heading.id}`;
    for (const link of document.querySelectorAll(`nav a[href="${CSS.escape(href)}"]`)) mark(link, isDone(block.dataset.exercise));
  }
}

/** The index: "n of m exercises done" beside each chapter, and a reset for all. */
export function markIndex() {
  const items = [...document.querySelectorAll("[data-exercises]")];
  const idsOf = (item) => item.dataset.exercises.split(" ").filter(Boolean);
  const any = items.some((item) => idsOf(item).some((id) => Object.keys(get(id)).length));
  for (const item of items) {
    const ids = idsOf(item);
    const done = ids.filter(isDone).length;
    let tally = item.querySelector(".exercise-tally");
    if (!tally) {
      tally = document.createElement("span");
      tally.className = "exercise-tally";
      (item.querySelector(".course-meta") || item).append(tally); // beside the chapter's reading time
    }
    // before the reader has started: how many there are; after: how many are done
    tally.textContent = any ? ` · ${done} of ${ids.length} exercises done` : ` · ${ids.length} exercises`;
    tally.dataset.done = String(done);
  }
  const button = document.querySelector('[data-role="reset-all-exercises"]');
  if (button) button.hidden = !any;
}

function setUpIndex() {
  const button = document.querySelector('[data-role="reset-all-exercises"]');
  button?.addEventListener("click", () => {
    confirmReset(button, "Forget every exercise’s progress in this browser?", () => reset(null));
  });
  markIndex();
}

window.addEventListener("exercise-progress", () => {
  markContents();
  markIndex();
});
// another tab solved or reset something
window.addEventListener("storage", (event) => {
  if (event.key === KEY || event.key === null) window.dispatchEvent(new CustomEvent("exercise-progress"));
});

if (document.querySelector("[data-exercises]")) setUpIndex();
if (document.querySelector("[data-exercise]")) markContents();
