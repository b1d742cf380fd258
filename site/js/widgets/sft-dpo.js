// SFT, DPO or IPO on the model in this page: a thin view over pylib.web.posttrain_ops (run:posttrain_pretrain,
// run:posttrain_sft, run:posttrain_dpo, run:posttrain_ipo, posttrain_ask). Every number and sample comes from
// the worker, IPO's target margin 1/(2τ) too.
// Three parts, each its own form: pretraining and fine-tuning are streamed runs (widget-kit.js
// runStreamed) that share the widget's status, message and Stop; asking is one call.

import { fmtCell } from "../plot.js";
import { bindFields, checkOnLeave, markSettled, readConfig, readoutMap, runStreamed } from "../widget-kit.js";
import { lineChart } from "./job-kit.js";

const num = (v, d = 3) => (v == null ? "–" : v.toFixed(d));
const METHOD_NAMES = { sft: "SFT", dpo: "DPO", ipo: "IPO" };

/**
 * The widget as runStreamed sees it, for one part: that part's form, its run button and the shared Stop;
 * the widget's own message, announcer, data-status and data-result. (runStreamed finds these by their
 * data-role and data-action in the root it is given.)
 */
function partView(root, part, run, stop) {
  return {
    dataset: root.dataset,
    appendChild: (node) => root.appendChild(node),
    closest: (sel) => root.closest(sel),
    querySelectorAll: (sel) => part.querySelectorAll(sel), // the part's fields' message slots (checkOnLeave)
    querySelector(sel) {
      if (sel === '[data-role="form"]') return part.querySelector(sel);
      if (sel === '[data-action="run"]') return run;
      if (sel === '[data-action="stop"]') return stop;
      return root.querySelector(sel);
    },
  };
}

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const prePart = $('[data-role="pretrain-part"]'), tunePart = $('[data-role="tune-part"]'), askPart = $('[data-role="ask-part"]');
  const preButton = $('[data-action="pretrain"]');
  const runButton = $('[data-action="run"]');
  const stopButton = $('[data-action="stop"]');
  const askButton = $('[data-action="ask"]');
  const progress = $('[data-role="progress"]');
  const answerEl = $('[data-role="answer"]');
  const config = readConfig(root);
  const readouts = readoutMap(root);
  const preFields = bindFields(prePart), fields = bindFields(tunePart), askFields = bindFields(askPart);
  let pretrained = false;
  let plot = null;
  let series = [[], []];
  let label = "loss";
  const chartEl = $('[data-role="chart"]');
  // DPO's and IPO's second chart: each step's batch mean margin h, and IPO's target as a reference line
  const marginEl = $('[data-role="margin"]');
  let marginPlot = null;
  let margins = [[], []];
  function resetMarginChart(target) {
    margins = [[], []];
    if (marginPlot) marginPlot.destroy();
    marginPlot = lineChart(marginEl, [{ label: "margin h (batch mean)", color: 2 }],
      { ylabel: "margin h (nats)", height: 200, refs: target == null ? [] : [{ value: target, label: "IPO's target" }] });
    marginPlot.target = target;
    marginPlot.method = METHOD_NAMES[method];
  }
  function addMargins(points) {
    for (const p of points) {
      if (p.margin == null) continue;
      margins[0].push(p.step);
      margins[1].push(p.margin);
    }
    if (!margins[0].length) return;
    marginPlot.setData(margins);
    const n = margins[0].length - 1;
    const goal = marginPlot.target == null ? "" : `; IPO's target is ${fmtCell(marginPlot.target)}`;
    marginPlot.describe(`${marginPlot.method}: the batch's mean margin h went from ${fmtCell(margins[1][0])} at step ${margins[0][0]} to ${fmtCell(margins[1][n])} at step ${margins[0][n]}${goal}.`);
  }

  function resetChart(name) {
    label = name;
    series = [[], []];
    if (plot) plot.destroy();
    plot = lineChart(chartEl, [{ label: name, color: 1 }], { ylabel: name, height: 200 });
  }
  function addPoints(points) {
    for (const p of points) {
      if (p.loss == null) continue;
      series[0].push(p.step);
      series[1].push(p.loss);
    }
    if (!series[0].length) return;
    plot.setData(series);
    const n = series[0].length - 1;
    plot.describe(`The ${label} went from ${fmtCell(series[1][0])} at step ${series[0][0]} to ${fmtCell(series[1][n])} at step ${series[0][n]}.`);
  }

  const item = $('template[data-role="sample-item"]');
  function showList(el, rows) {
    el.replaceChildren();
    for (const row of rows) {
      const li = item.content.firstElementChild.cloneNode(true);
      li.querySelector('[data-role="prompt"]').textContent = row.prompt;
      li.querySelector('[data-role="response"]').textContent = row.response;
      li.querySelector('[data-role="truth"]').textContent = row.truth || "";
      el.append(li);
    }
  }
  const answerRows = (answers) => answers.map((a) => ({
    prompt: `${a.line}\nWho? `, response: a.text + (a.ended ? "" : " …"), truth: `speaker: ${a.truth}`,
  }));
  const sampleRows = (samples) => samples.map((s) => ({ prompt: `…${s.prompt.slice(-24)}`, response: s.response }));
  function setScores(nameA, a, nameB, b) {
    $('[data-role="score-a-name"]').textContent = nameA;
    $('[data-role="score-b-name"]').textContent = nameB;
    readouts.score_a.textContent = a;
    readouts.score_b.textContent = b;
  }
  // A run replaces the model an answer on show came from: the answer goes, and the box says why.
  const withdrawAnswer = () => {
    answerEl.textContent = root.dataset.answer ? "The models have changed since that answer (a new run started): ask again." : "";
    delete root.dataset.answer;
  };
  // while one run goes on the other part's button and Ask wait; fine-tuning and asking need a pretrained model
  const busy = (on) => {
    preButton.disabled = on;
    runButton.disabled = on || !pretrained;
    askButton.disabled = on || !pretrained;
  };

  // pretraining: pylib names its fields steps and seed; this part's are pretrain_steps and pretrain_seed
  const renamed = (err) => {
    if (err && err.errors) err.errors = Object.fromEntries(Object.entries(err.errors).map(([k, v]) => [k === "steps" || k === "seed" ? `pretrain_${k}` : k, v]));
    return err;
  };
  const preClient = { start: () => client.start(), stop: () => client.stop(),
    call: (op, args, opts) => client.call(op, args, opts).catch((err) => { throw renamed(err); }) };

  const pretrain = runStreamed(partView(root, prePart, preButton, stopButton), preClient, {
    op: "run:posttrain_pretrain",
    fields: preFields,
    args: () => ({ steps: preFields.values().pretrain_steps, seed: preFields.values().pretrain_seed }),
    checkErrors: (errors) => renamed({ errors }).errors, // a field checked on leaving it: the same renaming
    startText: "Pretraining…",
    announceStart: "Pretraining started.",
    onStart() {
      pretrained = false;
      withdrawAnswer();
      busy(true);
      delete root.dataset.pretrained;
      progress.value = 0;
      resetChart("training loss");
      $('[data-role="before"]').replaceChildren();
      $('[data-role="after"]').replaceChildren();
    },
    onEvent(ev) {
      if (ev.kind !== "chunk") return null;
      addPoints(ev.chunk.losses);
      progress.value = ev.chunk.step / ev.chunk.steps;
      return `Pretraining… step ${ev.chunk.step} of ${ev.chunk.steps}.`;
    },
    onResult(value) {
      const r = value.result;
      readouts.steps.textContent = String(r.steps);
      let out;
      if (r.complete) {
        pretrained = true;
        root.dataset.pretrained = JSON.stringify({ steps: r.steps, final_loss: r.final_loss });
        showList($('[data-role="before"]'), answerRows(r.answers));
        out = { status: "done", text: `Pretrained: ${r.steps} steps, last training batch's loss ${num(r.final_loss)}. `
          + "Below, its answers to held-out speaker questions (it has never seen one). Now fine-tune a copy." };
      } else if (r.diverged) {
        out = { status: "error", text: `The pretraining run diverged at step ${r.steps}: no model to fine-tune. Press Pretrain again.` };
      } else {
        out = { status: "stopped", text: `Stopped after ${r.steps} steps: pretraining must finish before fine-tuning. Press Pretrain again.` };
      }
      busy(false);
      return out;
    },
    onError() { busy(false); },
  });

  // fine-tuning: the method chosen at Start (read by args(), just before the call) decides the op
  let method = "sft";
  const tuneClient = { start: () => client.start(), stop: () => client.stop(),
    call: (op, args, opts) => client.call(`run:posttrain_${method}`, args, opts) };
  const tune = runStreamed(partView(root, tunePart, runButton, stopButton), tuneClient, {
    op: "run:posttrain_<method>",
    checkOp: () => `run:posttrain_${method}`, // read after args(), which sets method: leaving a field checks its method's
    fields,
    args() {
      const v = fields.values();
      method = v.method;
      const args = { steps: v.steps, seed: v.seed };
      if (method === "sft") return { ...args, arm: v.arm };
      return method === "dpo" ? { ...args, beta: v.beta, target: v.target } : { ...args, tau: v.tau, target: v.target };
    },
    startText: "Starting…",
    announceStart: "Fine-tuning started.",
    onStart() {
      busy(true);
      resetChart(`${METHOD_NAMES[method]} loss (batch)`);
      $('[data-role="after"]').replaceChildren();
      for (const el of Object.values(readouts)) el.textContent = "–";
    },
    onEvent(ev) {
      if (ev.kind === "start") {
        withdrawAnswer(); // the settings were accepted: the fine-tuned copy the answer came from is gone
        if (method === "sft") return null;
        resetMarginChart(ev.info.target_margin);
        return `${METHOD_NAMES[method]} on ${ev.info.pairs} pairs…`;
      }
      if (ev.kind !== "chunk") return null;
      addPoints(ev.chunk.records);
      if (method !== "sft") addMargins(ev.chunk.records);
      readouts.steps.textContent = String(ev.chunk.step);
      return `${METHOD_NAMES[method]}… step ${ev.chunk.step} of ${ev.chunk.steps}.`;
    },
    onResult(value) {
      const r = value.result;
      readouts.steps.textContent = String(r.steps);
      if (method === "sft") {
        const b = r.before.scores, a = r.after.scores;
        setScores(`loss per response token, ${r.eval_pairs} held-out pairs`, `${num(b.response_loss)} → ${num(a.response_loss)}`,
          "speaker accuracy (before → after)", `${num(b.accuracy, 2)} → ${num(a.accuracy, 2)} (chance: 1 in ${r.speakers}, ${num(1 / r.speakers, 3)})`);
        showList($('[data-role="before"]'), answerRows(r.before.answers));
        showList($('[data-role="after"]'), answerRows(r.after.answers));
      } else {
        const b = r.before, a = r.after;
        setScores(`frequency of “${r.settings.target}”, ${r.eval_prompts} held-out prompts`, `${num(b.frequency)} → ${num(a.frequency)}`,
          "KL from the pretrained model (nats per response)", `${num(b.kl, 2)} → ${num(a.kl, 2)}`);
        showList($('[data-role="before"]'), sampleRows(b.samples));
        showList($('[data-role="after"]'), sampleRows(a.samples));
        readouts.margin.textContent = num(r.pairs_margin, 2) + (r.target_margin == null ? "" : ` (target ${num(r.target_margin, 2)})`);
      }
      busy(false);
      const what = method === "sft" ? `SFT (${r.arm === "response" ? "response only" : "whole sequence"})` : METHOD_NAMES[method];
      const margin = method === "sft" ? "" : ` The margin h on the training pairs is ${num(r.pairs_margin, 2)} nats`
        + (r.target_margin == null ? " (it starts at 0)." : `, against IPO's target of ${num(r.target_margin, 2)} (it starts at 0).`);
      return { status: value.stopped ? "stopped" : "done", result: { method, ...r },
        text: `${value.stopped ? "Stopped" : "Done"}: ${what}, ${r.steps} steps. The samples are the model as it is now.${margin}` };
    },
    onError() { busy(false); },
  });
  // switching the method swaps a default step count for the other method's default
  for (const radio of tunePart.querySelectorAll('input[name="method"]')) {
    radio.addEventListener("change", () => {
      const steps = fields.input("steps").value;
      const defaults = { sft: config.sft_steps, dpo: config.dpo_steps, ipo: config.ipo_steps };
      if (Object.values(defaults).some((d) => steps === String(d))) fields.set("steps", defaults[fields.values().method]);
    });
  }

  // The ask part has its own data-status and data-settles (the widget's are its runs'), so that the
  // answer on show can be told from the previous one's.
  askFields.form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (pretrain.running || tune.running || !pretrained) return;
    askPart.dataset.status = "running";
    try {
      const v = await client.call("posttrain_ask", { line: askFields.values().line, seed: fields.values().seed });
      askFields.clearErrors();
      const lines = [`Asked: ${v.line}\nWho?` + (v.dropped ? `  (${v.dropped} character${v.dropped > 1 ? "s" : ""} the model does not know left out)` : ""),
        `Pretrained model: ${v.pretrained.text}${v.pretrained.ended ? "" : " …"}`];
      if (v.tuned) lines.push(`Fine-tuned by SFT (${v.arm === "response" ? "response only" : "whole sequence"}): ${v.tuned.text}${v.tuned.ended ? "" : " …"}`);
      else if (v.tuned_kind) lines.push(`The fine-tuned copy is by ${v.tuned_kind.toUpperCase()}, which learns which of two lines to prefer, not to answer: fine-tune by SFT to compare answers.`);
      else lines.push("No SFT copy yet: fine-tune by SFT to compare.");
      answerEl.textContent = lines.join("\n");
      root.dataset.answer = JSON.stringify(v);
      askPart.dataset.status = "done";
    } catch (err) {
      if (err.kind === "input" && err.errors) {
        const unplaced = askFields.setErrors(err.errors);
        answerEl.textContent = Object.keys(unplaced).length ? Object.values(unplaced).join("\n")
          : "Not asked: check Your line (the message is under it).";
      } else {
        answerEl.textContent = err.message;
      }
      askPart.dataset.status = "error";
    } finally {
      markSettled(askPart);
    }
  });

  // a line is checked when the reader leaves it, as Ask would check it (not while a run goes)
  checkOnLeave(askPart, { op: "posttrain_ask", args: () => ({ line: askFields.values().line, seed: fields.values().seed }),
    fields: askFields, skip: () => pretrain.running || tune.running });

  if (!(await pretrain.ready(null, "Press Pretrain: the course model trains here first, then a copy of it is fine-tuned."))) return;
  busy(false);
}
