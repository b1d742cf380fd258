// The JS half of a widget (the HTML half is site/templates/macros.html). How to write a widget:
//
//   export async function mount(root, client) {
//     const fields = bindFields(root);                 // sliders <-> inputs, error slots, aria-invalid
//     const run = runStreamed(root, client, {           // a streamed run (training): Start/Stop, states,
//       op: "train", fields, args: () => fields.values(),  // focus, data-status/-result, announcer
//       onClear() { …reset readouts and chart… },     // at the first event: a refused input keeps the last run
//       onEvent(ev) { …update readouts/chart…; return "Training… step 40 of 400."; },
//       onResult(value) { return { status: "done", text: "Done: …", result: {…} }; },
//     });
//     await run.ready(async () => { …set-up calls once Python is ready… });
//   }
// A calculator (one call per change, no Stop) uses calculator(root, client, {op, fields, onResult}).
// Both check a field when the reader leaves it, with the op's own Python check (checkOnLeave).
// Status without a run: makeStatus(root). Charts: site/js/plot.js. Read nothing into innerHTML.
// Examples: widgets/train.js (runStreamed + LossChart), widgets/lr-sweep.js (log slider over the
// measured U-curve, release to run, SVG chart), widgets/memory-calculator.js (calculator + sliders).

import { call as pythonCall } from "./pyodide-client.js";

// The widget's JSON config, from its <script data-role="config"> element.
export const readConfig = (root) => JSON.parse(root.querySelector('[data-role="config"]').textContent);

// Every [data-readout] element in the widget, by its data-readout name.
export const readoutMap = (root) =>
  Object.fromEntries([...root.querySelectorAll("[data-readout]")].map((el) => [el.dataset.readout, el]));

// Disables buttons, shows "Loading Python…", starts Python and runs setUp; false (error shown) on failure.
export async function startPython(client, setStatus, buttons, setUp = null) {
  for (const button of buttons) button.disabled = true;
  setStatus("loading", "Loading Python…");
  try {
    await client.start();
    if (setUp) await setUp();
  } catch (err) {
    setStatus("error", err.message);
    return false;
  }
  return true;
}

// ---------------------------------------------------------------------------
// The announcer: a polite live region (the status macro's [data-role=announcer])

const PROGRESS_EVERY_MS = 5000;

/** announcer(root): {say(text) now; progress(text) at most once every 5 s; reset()}. The visible
 *  message is not a live region: only what goes through here is announced. */
export function announcer(root, every = PROGRESS_EVERY_MS) {
  let region = root.querySelector('[data-role="announcer"]');
  if (!region) { // a template not yet on the macros: add the region, so the kit works there too
    region = document.createElement("p");
    region.className = "kit-announcer";
    region.dataset.role = "announcer";
    region.setAttribute("role", "status");
    region.setAttribute("aria-live", "polite");
    region.setAttribute("aria-atomic", "true");
    root.appendChild(region);
  }
  let last = 0;
  const say = (text) => {
    // the same text twice would not be announced again: clear, then set on the next frame
    region.textContent = "";
    last = performance.now();
    requestAnimationFrame(() => { region.textContent = text; });
  };
  return {
    region,
    say,
    progress(text) { if (performance.now() - last >= every) say(text); },
    reset() { last = 0; },
  };
}

// A widget's data-status once a run or a call has ended.
export const SETTLED = ["done", "error", "stopped"];

/** markSettled(root): count one more ended run or call on root's data-settles. Readers, and the
 *  browser tests, can tell a new result from an old one by it: a status that is "done" again says
 *  nothing about whether it is the same "done". */
export function markSettled(root) {
  root.dataset.settles = String((Number(root.dataset.settles) || 0) + 1);
}

/** setPending(root, key, on): say whether work keyed `key` is on its way in root (a live update
 *  waiting for the keys to pause, a call not yet answered). root carries data-pending while any key
 *  is on: until it is gone, data-status and data-result may still be an earlier answer's. */
const pendingKeys = new WeakMap();
export function setPending(root, key, on) {
  let keys = pendingKeys.get(root);
  if (!keys) pendingKeys.set(root, (keys = new Set()));
  if (on) keys.add(key);
  else keys.delete(key);
  if (keys.size) root.dataset.pending = "";
  else delete root.dataset.pending;
}

/** makeStatus(root): setStatus(status, text, announce) sets data-status and the message; announce is
 *  "now", "throttled" or false (default: "now" for done, error and stopped, else false). A settled
 *  status (SETTLED) also counts on data-settles (markSettled). Has .announcer. */
export function makeStatus(root) {
  const message = root.querySelector('[data-role="message"]');
  if (message && message.getAttribute("aria-live")) { // an older template: the message was the live region
    message.removeAttribute("aria-live");
    message.removeAttribute("role");
  }
  const ann = announcer(root);
  const setStatus = (status, text, announce) => {
    root.dataset.status = status;
    if (text !== undefined && message) message.textContent = text;
    if (SETTLED.includes(status)) markSettled(root);
    const how = announce === undefined ? (SETTLED.includes(status) ? "now" : false) : announce;
    if (text && how === "now") ann.say(text);
    else if (text && how === "throttled") ann.progress(text);
  };
  setStatus.announcer = ann;
  setStatus.message = message;
  return setStatus;
}

// ---------------------------------------------------------------------------
// Fields: the field macro's input, slider, hint and error slot

/** The value a slider position stands for, and back. data-scale log|linear, data-min/-max in field units. */
function sliderScale(slider) {
  const lo = Number(slider.dataset.min), hi = Number(slider.dataset.max);
  const n = Number(slider.max) || 200;
  const log = slider.dataset.scale === "log";
  const a = log ? Math.log10(lo) : lo, b = log ? Math.log10(hi) : hi;
  const digits = Number(slider.dataset.digits) || 3;
  const integer = "integer" in slider.dataset;
  return {
    toValue(pos) {
      const t = a + ((b - a) * Math.min(n, Math.max(0, pos))) / n;
      const v = log ? 10 ** t : t;
      return integer ? Math.round(v) : Number(v.toPrecision(digits));
    },
    toPos(v) {
      if (!Number.isFinite(v) || (log && v <= 0)) return null;
      const t = log ? Math.log10(v) : v;
      return Math.min(n, Math.max(0, Math.round(((t - a) / (b - a)) * n)));
    },
  };
}

/** A number as the reader would type it (no float noise): 0.003, 1e-7, 2048. */
export const fieldText = (v) => String(v);

// ---------------------------------------------------------------------------
// Reset and share: every widget with settings gets a small bar under its title with "Reset settings"
// (each field back to the value the page was built with) and "Link to these settings" (an address
// that opens the page with this widget's fields filled in: #<widget id>?<name>=<value>&…, as
// TensorFlow Playground does; a hash, so the saved offline copy of the page still answers it).

const FIELD_TYPES = (el) => el.name && !el.dataset.sliderFor && !["submit", "button", "file", "hidden"].includes(el.type);

/** The widget's forms, in page order, and the key of a field in a link: its name, or with several
 *  forms (a widget in parts), "<form's index>.<name>". */
function linkKeys(host) {
  const forms = [...host.querySelectorAll('[data-role="form"]')];
  const keys = [];
  forms.forEach((form, i) => {
    const seen = new Set();
    for (const el of form.elements) {
      if (!FIELD_TYPES(el) || seen.has(el.name)) continue;
      seen.add(el.name);
      keys.push({ form, name: el.name, key: forms.length > 1 ? `${i}.${el.name}` : el.name });
    }
  });
  return keys;
}

function fieldValue(form, name) {
  const el = form.elements.namedItem(name);
  if (el instanceof RadioNodeList) return el.value;
  return el.type === "checkbox" ? (el.checked ? "1" : "0") : el.value;
}

function setFieldValue(form, name, value) {
  const el = form.elements.namedItem(name);
  if (el instanceof RadioNodeList) {
    for (const r of el) r.checked = r.value === value;
  } else if (el.type === "checkbox") {
    el.checked = value === "1";
  } else {
    el.value = value;
  }
}

function defaultOf(form, name) {
  const el = form.elements.namedItem(name);
  if (el instanceof RadioNodeList) return ([...el].find((r) => r.defaultChecked) || {}).value ?? "";
  if (el.type === "checkbox") return el.defaultChecked ? "1" : "0";
  if (el.tagName === "SELECT") return ([...el.options].find((o) => o.defaultSelected) || el.options[0] || {}).value ?? "";
  return el.defaultValue;
}

/** Sets the widget's fields, then tells the widget as if the reader had typed them (input, then change). */
function applyValues(host, values) {
  const touched = [];
  for (const { form, name, key } of linkKeys(host)) {
    if (!(key in values)) continue;
    setFieldValue(form, name, values[key]);
    touched.push(form.elements.namedItem(name));
  }
  for (const el of touched) {
    for (const target of el instanceof RadioNodeList ? [...el] : [el]) {
      target.dispatchEvent(new Event("input", { bubbles: true }));
      target.dispatchEvent(new Event("change", { bubbles: true }));
    }
  }
  return touched.length;
}

/** The settings a link in the address bar gives this widget ({key: value}), or null. */
function linkedValues(host) {
  const m = location.hash.match(/^#([^?]+)\?(.*)$/);
  if (!m || !host.id || decodeURIComponent(m[1]) !== host.id) return null;
  return Object.fromEntries(new URLSearchParams(m[2]));
}

const toolbars = new WeakSet();

function widgetTools(host) {
  if (toolbars.has(host) || !host.id) return;
  toolbars.add(host);
  const bar = document.createElement("div");
  bar.className = "widget-tools";
  const reset = document.createElement("button");
  reset.type = "button";
  reset.className = "button link";
  reset.dataset.action = "reset-settings";
  reset.textContent = "Reset settings";
  const share = document.createElement("button");
  share.type = "button";
  share.className = "button link";
  share.dataset.action = "share-settings";
  share.textContent = "Link to these settings";
  const said = document.createElement("span");
  said.className = "widget-tools-said";
  said.setAttribute("role", "status");
  bar.append(reset, share, said);
  const title = host.querySelector(".widget-title");
  if (title && title.parentElement === host) title.after(bar);
  else host.prepend(bar);

  reset.addEventListener("click", () => {
    const values = Object.fromEntries(linkKeys(host).map(({ form, name, key }) => [key, defaultOf(form, name)]));
    applyValues(host, values);
    for (const el of host.querySelectorAll('[data-role="form"] [aria-invalid]')) el.removeAttribute("aria-invalid");
    for (const slot of host.querySelectorAll("[data-error-for]")) slot.textContent = "";
    said.textContent = "Settings reset to the page's defaults.";
  });
  share.addEventListener("click", async () => {
    const params = new URLSearchParams(linkKeys(host).map(({ form, name, key }) => [key, fieldValue(form, name)]));
    const url = `${location.origin}${location.pathname}#${encodeURIComponent(host.id)}?${params}`;
    history.replaceState(history.state, "", url);
    let copied = false;
    try {
      await navigator.clipboard.writeText(url);
      copied = true;
    } catch { /* not allowed here: the address bar holds it */ }
    said.textContent = copied ? "Link copied; the address bar holds it too." : "The address bar now holds the link to these settings.";
  });
}

/**
 * bindFields(root, {onSlide, onCommit, commitDelay}): wires every field macro in root's form.
 *  - dragging (or arrow keys on) a slider writes its value into the field and calls onSlide(name, value);
 *    letting go of it calls onCommit(name, value) (with the keyboard: once the keys have been quiet for
 *    commitDelay ms, 800 by default). Typing moves the slider to the nearest position
 *    and leaves the typed text exactly as typed; text that is not a finite number leaves the slider
 *    where it is (a slider never produces NaN).
 * Returns {form, input(name), values() → {name: raw text}, set(name, value), setErrors({name: msg}) →
 *   names shown in a slot (others are returned in .unplaced), clearErrors(), focusFirstInvalid(),
 *   label(name)}. Also adds the widget's Reset and link bar (widgetTools) and applies the
 *   settings a link gives the widget.
 */
export function bindFields(root, { onSlide = null, onCommit = null, commitDelay = 800 } = {}) {
  const form = root.querySelector('[data-role="form"]');
  const input = (name) => form.elements.namedItem(name);
  const slotOf = (name) => root.querySelector(`[data-error-for="${CSS.escape(name)}"]`);
  const sliders = [...root.querySelectorAll("[data-slider-for]")];
  const host = root.closest("[data-widget]") || root; // the widget, whose data-pending a commit sets
  const sync = (slider) => {
    const pos = sliderScale(slider).toPos(Number(input(slider.dataset.sliderFor).value.trim() || NaN));
    if (pos != null) slider.value = String(pos);
    slider.setAttribute("aria-valuetext", input(slider.dataset.sliderFor).value.trim());
  };
  for (const slider of sliders) {
    const name = slider.dataset.sliderFor;
    const field = input(name);
    const scale = sliderScale(slider);
    sync(slider);
    slider.addEventListener("input", () => {
      const v = scale.toValue(Number(slider.value));
      field.value = fieldText(v);
      slider.setAttribute("aria-valuetext", field.value);
      if (onSlide) onSlide(name, v);
    });
    // let go of the pointer: commit at once; keys: once they have been quiet for commitDelay ms
    let pointer = false, timer = null;
    slider.addEventListener("pointerdown", () => { pointer = true; });
    slider.addEventListener("change", () => {
      if (!onCommit) return;
      clearTimeout(timer);
      const commit = () => {
        setPending(host, `commit:${name}`, false);
        onCommit(name, scale.toValue(Number(slider.value)));
      };
      if (pointer) { pointer = false; commit(); } else {
        timer = setTimeout(commit, commitDelay);
        setPending(host, `commit:${name}`, true); // the keys' commit is on its way
      }
    });
    field.addEventListener("input", () => sync(slider));
  }
  const names = () => [...form.elements].filter((e) => e.name && !e.dataset.sliderFor && e.type !== "submit" && e.type !== "button").map((e) => e.name);
  // the widget's Reset and link bar, and the settings a link gives it (applied once its last form is bound)
  const widget = form.closest("[data-widget]");
  if (widget) {
    widgetTools(widget);
    const forms = widget.querySelectorAll('[data-role="form"]');
    const linked = form === forms[forms.length - 1] ? linkedValues(widget) : null;
    if (linked && applyValues(widget, linked)) {
      requestAnimationFrame(() => widget.scrollIntoView({ block: "start" }));
    }
  }
  const api = {
    form,
    input,
    label(name) {
      const el = input(name);
      const label = el && el.id ? root.querySelector(`label[for="${CSS.escape(el.id)}"]`) : el && el.closest("label");
      return label ? label.firstChild.textContent.trim() : name;
    },
    values() { return Object.fromEntries(names().map((n) => [n, input(n).value])); },
    set(name, value) {
      input(name).value = String(value);
      for (const s of sliders) if (s.dataset.sliderFor === name) sync(s);
    },
    /** Shows each message in its field's slot (or, in an older template, only marks the input). */
    setErrors(errors) {
      api.clearErrors();
      const unplaced = {};
      for (const [name, msg] of Object.entries(errors || {})) {
        const el = input(name);
        const slot = slotOf(name);
        if (el && el.setAttribute) el.setAttribute("aria-invalid", "true");
        if (slot) slot.textContent = msg;
        else unplaced[name] = msg;
      }
      return unplaced;
    },
    /** Shows msg in one field's slot (aria-invalid set), or clears it when msg is empty. */
    setError(name, msg) {
      const el = input(name);
      if (msg) el?.setAttribute?.("aria-invalid", "true");
      else el?.removeAttribute?.("aria-invalid");
      const slot = slotOf(name);
      if (slot) slot.textContent = msg || "";
    },
    clearErrors() {
      for (const n of names()) input(n)?.removeAttribute?.("aria-invalid");
      for (const slot of root.querySelectorAll("[data-error-for]")) slot.textContent = "";
    },
    focusFirstInvalid() { root.querySelector('[aria-invalid="true"]')?.focus(); },
  };
  return api;
}

/**
 * checkOnLeave(root, {op, args, fields, skip, errorsOf}): when the reader leaves a field they changed (its change
 * event), the op's own Python check of args() (op check_args, pylib/web/check_ops.py: the same code the
 * op runs, so the page never disagrees with it) says whether it would be refused: the field's message
 * is shown in its slot, or cleared, as are the messages of other fields that are now fine. Nothing
 * runs, and the status, the result and the drawing stay as they are. Only when the page's Python is
 * already up (html[data-pyodide=ready]): a page that starts Python on demand (the index) is not made
 * to load it for a check, and Start checks the fields as before; so does an op with no check of its
 * own, and skip() (a run going) defers the check to Start too. data-pending (key "check") is on while
 * a check is on its way, and data-checks counts the checks answered (as data-settles counts runs).
 */
export function checkOnLeave(root, { op, args, fields, skip = null, errorsOf = null }) {
  const form = root.querySelector('[data-role="form"]');
  if (!form || !fields || !op) return;
  const host = root.closest("[data-widget]") || root;
  // a chunked run ("train", "run:<name>") reads its arguments in its start op; op may be a function,
  // read after args() (a widget whose args() chooses the op); errorsOf(errors) renames Python's keys
  const startOf = (o) => (o === "train" ? "train_start" : o.startsWith("run:") ? `${o.slice(4)}_start` : o);
  let seq = 0;
  // A field left by pressing one of the widget's buttons (Start, Compute, Apply: they check the fields
  // themselves) is not checked: a message shown between the press and the release would move the
  // button from under the pointer and the click would be lost.
  let pressing = false;
  host.addEventListener("pointerdown", (event) => { pressing = !!event.target.closest?.("button"); }, true);
  for (const type of ["pointerup", "pointercancel"]) window.addEventListener(type, () => { pressing = false; }, true);
  form.addEventListener("change", (event) => {
    const el = event.target;
    if (!el || !FIELD_TYPES(el) || el.type === "range" || el.type === "checkbox" || el.type === "radio") return;
    if (pressing || document.documentElement.dataset.pyodide !== "ready" || (skip && skip())) return;
    let sent;
    try {
      sent = args();
    } catch {
      return; // the widget cannot say its args now: Start will
    }
    const checked = startOf(typeof op === "function" ? op() : op);
    const mine = ++seq;
    const { name, value } = el;
    setPending(host, "check", true);
    pythonCall("check_args", { op: checked, args: sent }).then((answer) => {
      if (mine !== seq || !answer || !answer.checked || el.value !== value) return; // stale, or no check
      const errors = (errorsOf ? errorsOf(answer.errors || {}) : answer.errors) || {};
      fields.setError(name, errors[name] || "");
      for (const slot of root.querySelectorAll("[data-error-for]")) {
        const other = slot.dataset.errorFor;
        if (other !== name && slot.textContent) fields.setError(other, errors[other] || "");
      }
    }, () => { /* a check that could not run says nothing: Start checks again */ }).finally(() => {
      host.dataset.checks = String((Number(host.dataset.checks) || 0) + 1);
      if (mine === seq) setPending(host, "check", false);
    });
  });
}

/** A failed call, shown: the reader's input errors go to their fields' slots (the message names the
 *  fields; the announcer reads the messages); any other error is the message. */
export function reportError(err, { fields, setStatus, kept = false }) {
  if (err && err.kind === "input" && err.errors) {
    const unplaced = fields ? fields.setErrors(err.errors) : err.errors;
    const placed = Object.keys(err.errors).filter((k) => !(k in unplaced));
    const labels = placed.map((k) => fields.label(k));
    const lines = [];
    if (placed.length) {
      lines.push(`Not run: check ${labels.join(", ")} (the message is under the field).` +
        (kept ? " What is shown is still the last run's." : ""));
    }
    lines.push(...Object.values(unplaced));
    setStatus("error", lines.join("\n"), false);
    setStatus.announcer.say(Object.values(err.errors).join(" "));
    if (fields && placed.length) return true; // the caller may focus the first invalid field
  } else {
    setStatus("error", (err && err.message) || String(err));
  }
  return false;
}

// ---------------------------------------------------------------------------
// Runs

// The streamed run going in this page ({root, stop}), if any: the worker trains one run at a time, so a
// second Start elsewhere says which widget is running and offers to stop it from there.
let activeRun = null;

function widgetTitle(widget) {
  const title = widget.querySelector(".widget-title, h2, h3, h4, legend");
  return title ? title.textContent.trim().replace(/\s+/g, " ") : "Another widget";
}

/** Start refused while another widget trains: say which, with a button that stops it and a link to
 *  it; once that run has ended, say so and invite Start again. */
function refuseWhileAnotherRuns(root, setStatus, other) {
  setStatus("ready", `Not started: “${widgetTitle(other.root)}” is training in this page, and the page trains one run at a time.`, "now");
  const box = setStatus.message;
  if (!box) return;
  const stopIt = document.createElement("button");
  stopIt.type = "button";
  stopIt.className = "kit-stop-other";
  stopIt.textContent = "Stop that run";
  stopIt.addEventListener("click", () => {
    other.stop();
    stopIt.disabled = true;
    stopIt.textContent = "Stopping it…";
  });
  const goTo = document.createElement("a");
  goTo.href = `#${other.root.id}`;
  goTo.textContent = "Go to it";
  box.append(" ", stopIt, " ", goTo);
  document.addEventListener("course-run-ended", () => {
    if (box.contains(stopIt)) setStatus("ready", "That run has ended: press Start to run this one.", "now");
  }, { once: true });
}

/**
 * runStreamed(root, client, opts): the one implementation of a streamed run with Start and Stop.
 *   opts.op           the worker op ("train", "run:schedule_sweep", …)
 *   opts.args()       the call's args, read at each Start (e.g. fields.values())
 *   opts.fields       bindFields(root) result: its errors are cleared at Start and shown on input errors
 *   opts.onStart()    at the press, before the call: what must not wait (disable a button)
 *   opts.onClear()    reset readouts and charts: at the run's first event (or its result), so an input
 *                     the worker refuses leaves the last good run on show
 *   opts.onEvent(ev)  every streamed event ({kind: "start", info} | {kind: "chunk", chunk}); may return a
 *                     progress text: shown in the message at once, announced at most every 5 s
 *   opts.onResult(value) → {status: "done"|"stopped"|"error", text, result?}: result becomes data-result
 *                     (only when given); value.stopped tells a stopped run
 *   opts.onError(err) extra clean-up after a failed call (the error is shown for you)
 *   opts.confirm(args) a sentence when the run deserves a second thought before it starts (it would run
 *                     for long): Start then shows it and starts nothing; a second Start with the same
 *                     args runs (null: start at once)
 *   opts.startText ("Starting…"), opts.announceStart ("Run started."), opts.stoppingText
 * Handles: data-status (running → done|stopped|error), data-result cleared at Start, Start/Stop enabled
 * and disabled, focus (Start → Stop while running → Start after; an input error → the first bad
 * field), the announcer. Returns {start(), stop(), ready(setUp?, text?), running, setStatus, announcer}.
 */
export function runStreamed(root, client, opts) {
  const form = root.querySelector('[data-role="form"]');
  const runButton = root.querySelector('[data-action="run"]');
  const stopButton = root.querySelector('[data-action="stop"]');
  const setStatus = makeStatus(root);
  const ann = setStatus.announcer;
  let running = false;

  const focusLost = (el) => document.activeElement === el || document.activeElement === document.body || !document.activeElement;

  async function start() {
    if (running) return;
    if (activeRun && activeRun.root !== root) {
      refuseWhileAnotherRuns(root, setStatus, activeRun);
      return;
    }
    const args = opts.args ? opts.args() : {};
    const warning = opts.confirm ? opts.confirm(args) : null;
    const asked = JSON.stringify(args);
    if (warning && root.dataset.confirmFor !== asked) {
      root.dataset.confirmFor = asked;
      setStatus("ready", `${warning} Press Start again to run it anyway, or change the settings.`, "now");
      return;
    }
    delete root.dataset.confirmFor;
    running = true;
    activeRun = { root, stop };
    runButton.disabled = true;
    if (stopButton) {
      stopButton.disabled = false;
      if (focusLost(runButton)) stopButton.focus();
    }
    if (opts.fields) opts.fields.clearErrors();
    delete root.dataset.result;
    if (opts.onStart) opts.onStart();
    const loading = client.onDemand?.() && document.documentElement.dataset.pyodide !== "ready";
    setStatus("running", loading ? "Loading Python and NumPy into this page, then training…" : (opts.startText || "Starting…"), false);
    ann.say(opts.announceStart || "Run started.");
    // data-run-started: "false" from the press to the run's first event (the readouts still show the last
    // run's), "true" after it, and gone once the run has ended
    let cleared = false;
    root.dataset.runStarted = "false";
    const clear = () => {
      if (cleared) return;
      cleared = true;
      root.dataset.runStarted = "true";
      if (opts.onClear) opts.onClear();
    };
    const onEvent = (ev) => {
      clear();
      const text = opts.onEvent ? opts.onEvent(ev) : null;
      if (text) setStatus("running", text, "throttled");
    };
    let focusField = false;
    try {
      const value = await client.call(opts.op, args, { onEvent });
      clear();
      const out = (opts.onResult && opts.onResult(value)) || { status: value && value.stopped ? "stopped" : "done", text: "Done." };
      if (out.result !== undefined) root.dataset.result = JSON.stringify(out.result);
      setStatus(out.status, out.text);
    } catch (err) {
      focusField = reportError(err, { fields: opts.fields, setStatus, kept: !cleared && !!opts.onClear });
      if (opts.onError) opts.onError(err);
    } finally {
      running = false;
      delete root.dataset.runStarted;
      if (activeRun && activeRun.root === root) {
        activeRun = null;
        document.dispatchEvent(new CustomEvent("course-run-ended"));
      }
      runButton.disabled = false;
      const hadFocus = stopButton && focusLost(stopButton);
      if (stopButton) {
        stopButton.disabled = true;
        stopButton.removeAttribute("aria-disabled");
      }
      if (focusField) opts.fields.focusFirstInvalid();
      else if (hadFocus) runButton.focus();
    }
  }

  function stop() {
    if (!running || stopButton.getAttribute("aria-disabled") === "true") return;
    client.stop();
    // aria-disabled, not disabled: a disabled button would drop focus to <body>; the run's end
    // disables it and moves focus to Start
    stopButton.setAttribute("aria-disabled", "true");
    setStatus("running", opts.stoppingText || "Stopping after this chunk…", "now");
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    start();
  });
  if (stopButton) stopButton.addEventListener("click", stop);
  // a widget's args() may note what the run it starts asked for: not read while a run goes
  // (opts.checkOp, opts.checkErrors: the op to check and the errors' renaming, when they are not opts.op's)
  checkOnLeave(root, { op: opts.checkOp || opts.op, args: () => (opts.args ? opts.args() : {}), fields: opts.fields,
    skip: () => running, errorsOf: opts.checkErrors });

  return {
    start,
    stop,
    get running() { return running; },
    setStatus,
    announcer: ann,
    /** Starts Python (Start disabled, "Loading Python…"), runs setUp(), then enables Start and shows
     *  text. false (the error shown) when Python or setUp failed. On a page whose Python starts on
     *  demand (client.onDemand(): the index), Start is enabled at once and its press starts Python
     *  (client.call waits for it); setUp is not allowed there. */
    async ready(setUp = null, text = "Ready. Press Start.") {
      if (client.onDemand?.()) {
        if (setUp) throw new Error("runStreamed.ready: a set-up call needs Python before Start; not on an on-demand page");
        runButton.disabled = false;
        setStatus("ready", text, false);
        return true;
      }
      if (!(await startPython(client, setStatus, [runButton], setUp))) return false;
      runButton.disabled = false;
      setStatus("ready", text, false);
      return true;
    },
  };
}

/**
 * calculator(root, client, opts): one call per Compute (and, with live: true, per edit or slider move,
 * latest wins). opts: op, fields, args() (default fields.values()), checkArgs() (what a check on leaving a
 * field sends, default args()), onResult(value) → {text, result?},
 * onError(err) (clear what showed the last result), busy: extra buttons disabled while a call runs.
 * Returns {run() (buttons disabled while it runs), schedule() (live updates: one call at a time, the
 * latest wins, announced at most every few seconds), compute({announce}), ready(setUp?)}.
 */
export function calculator(root, client, opts) {
  const form = root.querySelector('[data-role="form"]');
  const runButton = root.querySelector('[data-action="run"]');
  const setStatus = makeStatus(root);
  const buttons = () => [runButton, ...(opts.busy || [])].filter(Boolean);
  let seq = 0;

  // data-pending (setPending) while a live update waits for the keys to pause (soon), or a call or
  // a queued live update is on its way: the status may still read "done" from the last result then.
  let calls = 0, timer = null, inFlight = null;
  const markPending = () => setPending(root, "calculator", timer !== null || calls > 0 || inFlight !== null);

  async function compute({ announce = "now" } = {}) {
    const mine = ++seq;
    const args = opts.args ? opts.args() : opts.fields.values();
    calls++;
    markPending();
    setStatus("running", opts.runningText || "Computing…", false);
    try {
      const value = await client.call(opts.op, args);
      if (mine !== seq) return; // a newer call is on its way
      if (opts.fields) opts.fields.clearErrors();
      const out = opts.onResult(value) || {};
      if (out.result !== undefined) root.dataset.result = JSON.stringify(out.result);
      setStatus("done", out.text || "Done.", announce);
    } catch (err) {
      if (mine !== seq) return;
      delete root.dataset.result;
      if (opts.onError) opts.onError(err);
      reportError(err, { fields: opts.fields, setStatus });
    } finally {
      calls--;
      markPending();
    }
  }

  /** Compute with the buttons disabled (Compute, a preset). A live update still waiting for the keys
   * to pause is dropped: it would only compute the same fields again, just after. */
  async function run() {
    cancelSoon();
    for (const b of buttons()) b.disabled = true;
    try { await compute(); } finally { for (const b of buttons()) b.disabled = false; }
  }

  // schedule(): for live updates (a slider moving, a select changed): one call at a time, the last
  // request wins, the result announced at most every few seconds
  let again = false;
  function schedule() {
    cancelSoon();
    if (inFlight) { again = true; return inFlight; }
    inFlight = (async () => {
      try {
        do {
          again = false;
          await compute({ announce: "throttled" });
        } while (again);
      } finally {
        inFlight = null;
        markPending();
      }
    })();
    markPending();
    return inFlight;
  }

  // soon(ms): schedule() once typing has paused for ms; a later soon(), schedule() or run() replaces it
  function cancelSoon() {
    clearTimeout(timer);
    timer = null;
    markPending();
  }
  function soon(ms) {
    clearTimeout(timer);
    timer = setTimeout(schedule, ms);
    markPending();
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    run();
  });
  // opts.checkArgs(): the args to check, for a widget whose args() also notes what its call asked for
  // (a check must not change what the result shown is labelled with)
  const checkArgs = opts.checkArgs || opts.args || (() => opts.fields.values());
  checkOnLeave(root, { op: opts.op, args: checkArgs, fields: opts.fields });

  return {
    compute,
    run,
    schedule,
    soon,
    setStatus,
    /** Starts Python (buttons disabled), runs setUp(); false (the error shown) on failure. */
    async ready(setUp = null) {
      if (!(await startPython(client, setStatus, buttons(), setUp))) return false;
      for (const b of buttons()) b.disabled = false;
      return true;
    },
  };
}
