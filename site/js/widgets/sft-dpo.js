// SFT or DPO on the model in this page: a thin view over pylib.web.posttrain_ops (run:posttrain_pretrain,
// run:posttrain_sft, run:posttrain_dpo, posttrain_ask). Every number and sample comes from the worker.

import { invalidMarker, showRunError, readConfig, readoutMap, startPython, statusSetter, widgetParts, wireStop } from "../widget-kit.js";

const FIELDS = ["steps", "seed", "beta", "target", "arm"];
const PRE_FIELDS = { steps: "pretrain_steps", seed: "pretrain_seed" };
const num = (v, d = 3) => (v == null ? "–" : v.toFixed(d));

export async function mount(root, client) {
  const { $, form, message, runButton, stopButton } = widgetParts(root);
  const preForm = $('[data-role="pretrain-form"]');
  const preButton = $('[data-action="pretrain"]');
  const askForm = $('[data-role="ask-form"]');
  const askButton = $('[data-action="ask"]');
  const progress = $('[data-role="progress"]');
  const answerEl = $('[data-role="answer"]');
  const config = readConfig(root);
  const readouts = readoutMap(root);
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(FIELDS, (n) => (n === "arm" ? form.querySelector('input[name="arm"]') : form.elements[n]));
  const markPreInvalid = invalidMarker(Object.keys(PRE_FIELDS), (n) => preForm.elements[PRE_FIELDS[n]]);
  let running = false;
  let pretrained = false;
  let plot = null;
  let series = [[], []];
  const chartEl = $('[data-role="chart"]');
  const size = () => ({ width: Math.max(280, chartEl.clientWidth || 600), height: 200 });

  function resetChart(label) {
    series = [[], []];
    if (plot) plot.destroy();
    plot = new uPlot({
      ...size(),
      scales: { x: { time: false } },
      axes: [{ label: "step", stroke: "#444", grid: { stroke: "#eee" } }, { label, stroke: "#444", grid: { stroke: "#eee" }, size: 60 }],
      legend: { show: false },
      cursor: { drag: { x: false, y: false } },
      series: [{ label: "step" }, { label, stroke: "#2a5db0", width: 1.5, points: { show: false } }],
    }, series, chartEl);
  }
  function addPoints(points) {
    for (const p of points) {
      if (p.loss == null) continue;
      series[0].push(p.step);
      series[1].push(p.loss);
    }
    plot.setData(series);
  }
  if (typeof ResizeObserver !== "undefined") new ResizeObserver(() => plot && plot.setSize(size())).observe(chartEl);

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
  function setRunning(on) {
    running = on;
    preButton.disabled = on;
    runButton.disabled = on || !pretrained;
    askButton.disabled = on || !pretrained;
    stopButton.disabled = !on;
  }

  for (const f of [preForm, form, askForm]) f.addEventListener("submit", (event) => event.preventDefault());
  if (!(await startPython(client, setStatus, [preButton, runButton, askButton]))) return;
  resetChart("loss");
  setRunning(false);
  setStatus("idle", "Press Pretrain: the course model trains here first, then a copy of it is fine-tuned.");
  wireStop(stopButton, client, message, () => running);

  const method = () => form.querySelector('input[name="method"]:checked').value;
  for (const radio of form.querySelectorAll('input[name="method"]')) {
    radio.addEventListener("change", () => {
      const steps = form.elements.steps;
      if (steps.value === String(config.sft_steps) || steps.value === String(config.dpo_steps)) {
        steps.value = String(method() === "sft" ? config.sft_steps : config.dpo_steps);
      }
    });
  }

  preForm.addEventListener("submit", async () => {
    if (running) return;
    setRunning(true);
    pretrained = false;
    delete root.dataset.pretrained;
    delete root.dataset.result;
    markPreInvalid(null);
    progress.value = 0;
    resetChart("training loss");
    $('[data-role="before"]').replaceChildren();
    $('[data-role="after"]').replaceChildren();
    answerEl.textContent = "";
    setStatus("running", "Pretraining…");
    const args = { steps: preForm.elements.pretrain_steps.value, seed: preForm.elements.pretrain_seed.value };
    try {
      const value = await client.call("run:posttrain_pretrain", args, {
        onEvent: (ev) => {
          if (ev.kind === "chunk") {
            addPoints(ev.chunk.losses);
            progress.value = ev.chunk.step / ev.chunk.steps;
            message.textContent = `Pretraining… step ${ev.chunk.step} of ${ev.chunk.steps}.`;
          }
        },
      });
      const r = value.result;
      readouts.steps.textContent = String(r.steps);
      if (r.complete) {
        pretrained = true;
        root.dataset.pretrained = JSON.stringify({ steps: r.steps, final_loss: r.final_loss });
        showList($('[data-role="before"]'), answerRows(r.answers));
        setStatus("done", `Pretrained: ${r.steps} steps, last training batch's loss ${num(r.final_loss)}. `
          + "Below, its answers to held-out speaker questions (it has never seen one). Now fine-tune a copy.");
      } else if (r.diverged) {
        setStatus("error", `The pretraining run diverged at step ${r.steps}: no model to fine-tune. Press Pretrain again.`);
      } else {
        setStatus("stopped", `Stopped after ${r.steps} steps: pretraining must finish before fine-tuning. Press Pretrain again.`);
      }
    } catch (err) {
      showRunError(err, setStatus, markPreInvalid);
    } finally {
      setRunning(false);
    }
  });

  form.addEventListener("submit", async () => {
    if (running || !pretrained) return;
    setRunning(true);
    delete root.dataset.result;
    markInvalid(null);
    const m = method();
    resetChart(m === "sft" ? "SFT loss (batch)" : "DPO loss (batch)");
    $('[data-role="after"]').replaceChildren();
    for (const el of Object.values(readouts)) el.textContent = "–";
    setStatus("running", m === "sft" ? "Fine-tuning (SFT)…" : "Sampling the preference pairs from the pretrained model…");
    const args = { steps: form.elements.steps.value, seed: form.elements.seed.value };
    if (m === "sft") args.arm = form.querySelector('input[name="arm"]:checked').value;
    else Object.assign(args, { beta: form.elements.beta.value, target: form.elements.target.value });
    try {
      const value = await client.call(`run:posttrain_${m}`, args, {
        onEvent: (ev) => {
          if (ev.kind === "start" && m === "dpo") message.textContent = `DPO on ${ev.info.pairs} pairs…`;
          if (ev.kind === "chunk") {
            addPoints(ev.chunk.records);
            readouts.steps.textContent = String(ev.chunk.step);
            message.textContent = `${m === "sft" ? "SFT" : "DPO"}… step ${ev.chunk.step} of ${ev.chunk.steps}.`;
          }
        },
      });
      const r = value.result;
      readouts.steps.textContent = String(r.steps);
      root.dataset.result = JSON.stringify({ method: m, ...r });
      if (m === "sft") {
        const b = r.before.scores, a = r.after.scores;
        setScores(`loss per response token, ${r.eval_pairs} held-out pairs`, `${num(b.response_loss)} → ${num(a.response_loss)}`,
          "speaker accuracy (before → after)", `${num(b.accuracy, 2)} → ${num(a.accuracy, 2)}`);
        showList($('[data-role="before"]'), answerRows(r.before.answers));
        showList($('[data-role="after"]'), answerRows(r.after.answers));
      } else {
        const b = r.before, a = r.after;
        setScores(`frequency of “${r.settings.target}”, ${r.eval_prompts} held-out prompts`, `${num(b.frequency)} → ${num(a.frequency)}`,
          "KL from the pretrained model (nats per response)", `${num(b.kl, 2)} → ${num(a.kl, 2)}`);
        showList($('[data-role="before"]'), sampleRows(b.samples));
        showList($('[data-role="after"]'), sampleRows(a.samples));
      }
      const what = m === "sft" ? `SFT (${args.arm === "response" ? "response only" : "whole sequence"})` : "DPO";
      setStatus(value.stopped ? "stopped" : "done",
        `${value.stopped ? "Stopped" : "Done"}: ${what}, ${r.steps} steps. The samples are the model as it is now.`);
    } catch (err) {
      showRunError(err, setStatus, markInvalid);
    } finally {
      setRunning(false);
    }
  });

  askForm.addEventListener("submit", async () => {
    if (running || !pretrained) return;
    askForm.elements.line.removeAttribute("aria-invalid");
    try {
      const v = await client.call("posttrain_ask", { line: askForm.elements.line.value, seed: form.elements.seed.value });
      const lines = [`Asked: ${v.line}\nWho?` + (v.dropped ? `  (${v.dropped} character${v.dropped > 1 ? "s" : ""} the model does not know left out)` : ""),
        `Pretrained model: ${v.pretrained.text}${v.pretrained.ended ? "" : " …"}`];
      if (v.tuned) lines.push(`Fine-tuned by SFT (${v.arm === "response" ? "response only" : "whole sequence"}): ${v.tuned.text}${v.tuned.ended ? "" : " …"}`);
      else lines.push("No SFT copy yet: fine-tune by SFT to compare.");
      answerEl.textContent = lines.join("\n");
      root.dataset.answer = JSON.stringify(v);
    } catch (err) {
      if (err.errors && err.errors.line) askForm.elements.line.setAttribute("aria-invalid", "true");
      answerEl.textContent = err.errors ? Object.values(err.errors).join("\n") : err.message;
    }
  });
}
