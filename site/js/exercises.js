// Exercises: each [data-exercise] block (site/templates/exercise.html, rendered by build.py's
// exercise()) becomes live. The check is pylib.exercises' own, run in the cells' Python worker
// (site/js/cells.js: one run at a time per page, Stop interrupts it, a runaway answer restarts the
// worker), so the page and `python -m pylib.exercises check` say the same thing.
//
// Kinds: implement and investigate answers are code, in the cells' editor; a predict answer is a
// number, committed before the check runs pylib and shows how far off it was.
// Hints open one at a time; the solution only when asked, and the page records that it was opened.
// Progress is kept in this browser (site/js/progress.js). Every text from Python or from the reader
// is set as textContent: nothing they write becomes HTML.
//
// A block's root gets data-status idle|loading|running|done|error|stopped, data-settles (one more
// per ended check, widget-kit.markSettled), data-passed "true"|"false" after a check, and
// data-done "true" once the exercise is solved.

import { claimRun, formatSeconds, loadEditorKit, makeEditor, mountWhenNear, releaseRun, runningRoot, worker } from "./cells.js";
import * as progress from "./progress.js";
import { markSettled, SETTLED } from "./widget-kit.js";

const OUTPUT_CHARS = 100_000;

function setUpChapterTally() {
  const box = document.querySelector("[data-exercise-progress]");
  if (!box) return;
  const ids = [...document.querySelectorAll("[data-exercise]")].map((el) => el.dataset.exercise);
  const tally = box.querySelector('[data-role="tally"]');
  const resetButton = box.querySelector('[data-role="reset"]');
  const show = () => {
    const done = ids.filter(progress.isDone).length;
    tally.textContent = `Done: ${done} of ${ids.length} of this chapter’s exercises.`;
    box.dataset.done = String(done);
    resetButton.hidden = !ids.some((id) => Object.keys(progress.get(id)).length);
  };
  resetButton.addEventListener("click", () => {
    progress.confirmReset(resetButton, "Forget this chapter’s exercise progress in this browser (your answers stay in their boxes)?",
                          () => progress.reset(ids));
  });
  window.addEventListener("exercise-progress", show);
  show();
}

async function mount(root) {
  const $ = (role) => root.querySelector(`[data-role="${role}"]`);
  const id = root.dataset.exercise;
  const kind = root.dataset.kind;
  const takesCode = kind !== "predict";
  const [checkButton, stopButton, resetButton, statusBox, verdictBox, output, outputFrame] =
    ["check", "stop", "reset", "status", "verdict", "output", "output-frame"].map($);
  const doneBadge = $("done");

  const setStatus = (status, text) => {
    root.dataset.status = status;
    if (text !== undefined) statusBox.textContent = text;
    if (SETTLED.includes(status)) markSettled(root);
  };
  const showDone = () => {
    const done = progress.isDone(id);
    doneBadge.hidden = !done;
    if (done) root.dataset.done = "true";
    else delete root.dataset.done;
  };
  window.addEventListener("exercise-progress", showDone);
  showDone();

  // --- the answer: an editor, or a number
  let editor = null;
  let value = null;
  const storedAnswerKey = `course-exercise-answer:${id}`;
  if (takesCode) {
    const starter = root.querySelector('[data-role="static"]').textContent.replace(/\n+$/, "");
    let kit;
    try {
      kit = await loadEditorKit();
    } catch (err) {
      setStatus("error", `The editor could not be loaded (${err.message}).`);
      return;
    }
    let saved = null;
    try { saved = localStorage.getItem(storedAnswerKey); } catch { /* blocked */ }
    const keys = $("keys");
    editor = makeEditor(kit, $("editor"), saved ?? starter, {
      label: `Your answer to exercise ${id}, editable code`,
      describedBy: keys.id,
      onRun: () => checkButton.click(),
    });
    $("static").hidden = true;
    $("editor").hidden = false;
    keys.hidden = false;
    editor.contentDOM.addEventListener("focus", () => worker.start().catch(() => {}), { once: true });
    let saveTimer = null;
    editor.contentDOM.addEventListener("input", () => {
      clearTimeout(saveTimer);
      saveTimer = setTimeout(() => {
        try { localStorage.setItem(storedAnswerKey, editor.state.doc.toString()); } catch { /* blocked */ }
      }, 500);
    });
    resetButton.addEventListener("click", () => {
      editor.dispatch({ changes: { from: 0, to: editor.state.doc.length, insert: starter } });
      try { localStorage.removeItem(storedAnswerKey); } catch { /* blocked */ }
      if (runningRoot() !== root) setStatus("idle", "The answer box has the starter code again.");
    });
    root.exerciseAnswer = () => editor.state.doc.toString();
    root.setExerciseAnswer = (text) => editor.dispatch({ changes: { from: 0, to: editor.state.doc.length, insert: text } });
  } else {
    value = $("value");
    const committed = progress.get(id).prediction;
    const lock = (locked) => {
      value.readOnly = locked;
      checkButton.hidden = locked;
      resetButton.hidden = !locked;
    };
    if (typeof committed === "string") {
      value.value = committed;
      lock(true);
      const entry = progress.get(id);
      if (entry.message) showVerdict(entry.close === true, entry.message);
    }
    value.addEventListener("keydown", (event) => {
      if (event.key === "Enter") {
        event.preventDefault();
        checkButton.click();
      }
    });
    resetButton.addEventListener("click", () => {
      lock(false);
      verdictBox.hidden = true;
      delete root.dataset.passed;
      setStatus("idle", "Commit a new prediction: the check runs again.");
      value.focus();
    });
    root.lockPrediction = lock;
  }
  $("controls").hidden = false;
  $("help").hidden = !(root.querySelector('template[data-role="hints"]') || root.querySelector('template[data-role="solution"]'));

  function showVerdict(passed, message) {
    verdictBox.hidden = false;
    verdictBox.textContent = message;
    verdictBox.dataset.passed = String(passed);
    root.dataset.passed = String(passed);
  }

  // --- output of the reader's prints
  let outputChars = 0;
  const appendOutput = (text, stream) => {
    if (stream === "progress") {
      statusBox.textContent = `Checking… ${text}`;
      return;
    }
    outputFrame.hidden = false;
    if (outputChars >= OUTPUT_CHARS) return;
    const kept = text.slice(0, OUTPUT_CHARS - outputChars);
    outputChars += kept.length;
    if (stream === "err") {
      const span = document.createElement("span");
      span.className = "cell-stderr";
      span.textContent = kept;
      output.append(span);
    } else output.append(document.createTextNode(kept));
  };

  // --- check
  let current = null;
  checkButton.addEventListener("click", async () => {
    if (runningRoot() === root) return;
    const answer = takesCode ? editor.state.doc.toString() : value.value;
    if (!takesCode && !answer.trim()) {
      setStatus("error", "Type a number first: your prediction, before the run shows the answer.");
      value.focus();
      return;
    }
    if (!claimRun(root)) {
      setStatus(root.dataset.status, "Another cell or exercise on this page is running: stop it or wait for it first.");
      return;
    }
    checkButton.disabled = true;
    stopButton.disabled = false;
    output.replaceChildren();
    outputChars = 0;
    outputFrame.hidden = true;
    const attempt = { cancelled: false };
    current = attempt;
    const t0 = performance.now();
    if (!worker.xworker) setStatus("loading", "Starting Python for the check (a few seconds the first time)…");
    try {
      await worker.start();
      if (attempt.cancelled) {
        setStatus("stopped", "Stopped before the check ran.");
        return;
      }
      setStatus("running", "Checking…");
      const reply = await worker.check(id, answer, appendOutput);
      const seconds = formatSeconds((performance.now() - t0) / 1000);
      if (reply.status === "stopped") {
        if (reply.restarted) appendOutput("\nStopped: the answer did not stop when asked, so Python was restarted.\n", "err");
        setStatus("stopped", reply.restarted ? "Stopped (Python was restarted)." : "Stopped: the check did not finish.");
        return;
      }
      if (reply.status !== "done" || !reply.verdict) {
        setStatus("error", `The check could not run: ${reply.message}`);
        return;
      }
      const verdict = reply.verdict;
      if (verdict.status === "invalid") {
        showVerdict(false, verdict.message);
        setStatus("error", `Not checked (${seconds}): the answer needs fixing first.`);
        return;
      }
      showVerdict(verdict.passed, verdict.message);
      if (takesCode) {
        if (verdict.passed) progress.update(id, { done: true, at: new Date().toISOString() });
        setStatus("done", verdict.passed ? `Checked in ${seconds}: right.` : `Checked in ${seconds}: not yet.`);
      } else {
        // A prediction counts as done once committed and checked, near or far: the point is to predict.
        progress.update(id, { done: true, at: new Date().toISOString(), prediction: answer.trim(),
                              close: verdict.passed, message: verdict.message });
        root.lockPrediction(true);
        setStatus("done", verdict.passed ? "Committed and checked: close." : "Committed and checked: see how far off.");
      }
    } catch (err) {
      appendOutput(`${err && err.message ? err.message : err}\n`, "err");
      setStatus("error", "Python could not be started for the check; the output says why.");
    } finally {
      current = null;
      releaseRun(root);
      checkButton.disabled = false;
      stopButton.disabled = true;
      const stranded = document.activeElement === stopButton || document.activeElement === document.body
        || (!takesCode && document.activeElement === value && value.readOnly); // a committed prediction
      if (stranded) {
        (checkButton.hidden ? resetButton : checkButton).focus();
      }
    }
  });

  stopButton.addEventListener("click", () => {
    if (runningRoot() !== root) return;
    if (current && root.dataset.status === "loading") {
      current.cancelled = true;
      statusBox.textContent = "Stopping: the check will not run…";
      return;
    }
    setStatus("running", "Stopping…");
    worker.stop();
  });

  // --- hints, one at a time, and the solution when asked
  const hintButton = $("hint");
  const hintList = $("hint-list");
  const hintItems = [...(root.querySelector('template[data-role="hints"]')?.content.querySelectorAll("li") || [])];
  const showHints = (n) => {
    hintList.replaceChildren(...hintItems.slice(0, n).map((li) => li.cloneNode(true)));
    if (n >= hintItems.length) {
      hintButton.hidden = true;
    } else {
      hintButton.hidden = false;
      hintButton.textContent = `Show ${n ? "another" : "a"} hint (${n + 1} of ${hintItems.length})`;
    }
  };
  showHints(Math.min(progress.get(id).hints || 0, hintItems.length));
  hintButton.addEventListener("click", () => {
    const n = Math.min((progress.get(id).hints || 0) + 1, hintItems.length);
    progress.update(id, { hints: n });
    showHints(n);
    hintList.lastElementChild?.setAttribute("tabindex", "-1");
    hintList.lastElementChild?.focus();
  });
  const solutionButton = root.querySelector('button[data-role="solution"]');
  const solutionBox = $("solution-box");
  const showSolution = () => {
    const template = root.querySelector('template[data-role="solution"]');
    solutionBox.replaceChildren(template.content.cloneNode(true));
    solutionBox.hidden = false;
    solutionButton.hidden = true;
    const note = document.createElement("p");
    note.className = "exercise-solution-note";
    const opened = progress.get(id).solution;
    note.textContent = `You opened the solution${opened ? ` on ${new Date(opened).toLocaleString()}` : ""}; this browser keeps a note of it.`;
    solutionBox.prepend(note);
  };
  if (progress.get(id).solution) showSolution();
  solutionButton.addEventListener("click", () => {
    progress.update(id, { solution: new Date().toISOString() });
    showSolution();
    solutionBox.setAttribute("tabindex", "-1");
    solutionBox.focus();
  });
  window.addEventListener("exercise-progress", () => {
    // a reset: hints and the solution close again
    const entry = progress.get(id);
    if (!entry.solution && !solutionBox.hidden) {
      solutionBox.hidden = true;
      solutionBox.replaceChildren();
      solutionButton.hidden = false;
    }
    if (!entry.hints && hintList.children.length) showHints(0);
    if (!takesCode && entry.prediction === undefined && value.readOnly) {
      root.lockPrediction(false);
      verdictBox.hidden = true;
      delete root.dataset.passed;
    }
  });

  root.dataset.mounted = "true";
}

setUpChapterTally();
mountWhenNear([...document.querySelectorAll("[data-exercise]")], mount, "exercise");
