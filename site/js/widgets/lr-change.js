// A live run whose peak learning rate the reader changes mid-run: a thin view over
// run:schedule_lrchange and schedule_lrchange_set (pylib.web.schedule_ops). The worker handles the
// set call between two chunks, so the change applies from the next step; the chart marks it.

import { readoutMap, startPython, statusSetter, widgetParts, wireStop } from "../widget-kit.js";

const COLORS = { loss: "rgba(42, 93, 176, 0.6)", val: "#d9480f", lr: "#b45f06", change: "#8e44ad", diverged: "#b3261e" };

export async function mount(root, client) {
  const { $, form, message, runButton, stopButton } = widgetParts(root);
  const applyForm = $('[data-role="apply-form"]');
  const applyButton = $('[data-action="apply"]');
  const applyMessage = $('[data-role="apply-message"]');
  const chartEl = $('[data-role="chart"]');
  const readouts = readoutMap(root);
  const setStatus = statusSetter(root, message);
  let running = false;
  let plot = null;
  let data = [[], [], [], []];
  let marks = []; // [{step, label, color}]

  const size = () => {
    const width = Math.max(280, chartEl.clientWidth || 600);
    return { width, height: width < 500 ? 240 : 300 };
  };
  const fmt = (digits) => (u, v) => (v == null ? "–" : v.toPrecision(digits));
  function reset(n) {
    data = [Array.from({ length: n }, (_, i) => i), new Array(n).fill(null), new Array(n).fill(null), new Array(n).fill(null)];
    if (plot) plot.destroy();
    plot = new uPlot({
      ...size(),
      scales: { x: { time: false }, lr: { range: (u, lo, hi) => [0, (hi || 1) * 1.1] } },
      legend: { show: false },
      cursor: { drag: { x: false, y: false } },
      axes: [
        { label: "step", stroke: "#444", grid: { stroke: "#eee" } },
        { label: "loss (nats/token)", stroke: "#444", grid: { stroke: "#eee" }, size: 56 },
        { scale: "lr", side: 1, label: "learning rate", stroke: COLORS.lr, grid: { show: false }, size: 64,
          values: (u, vals) => vals.map((v) => +v.toPrecision(2)) },
      ],
      series: [
        { label: "step" },
        { label: "train loss", stroke: COLORS.loss, width: 1, points: { show: false }, value: fmt(4) },
        { label: "val loss", stroke: COLORS.val, width: 0, paths: () => null, points: { show: true, size: 7, fill: COLORS.val, stroke: COLORS.val }, value: fmt(4) },
        { label: "lr", scale: "lr", stroke: COLORS.lr, width: 1.5, dash: [2, 3], points: { show: false }, value: fmt(3) },
      ],
      hooks: {
        draw: [(u) => {
          const ctx = u.ctx;
          const dpr = window.devicePixelRatio || 1;
          ctx.save();
          ctx.font = `${11 * dpr}px system-ui, sans-serif`;
          marks.forEach((m, i) => {
            const x = u.valToPos(m.step, "x", true);
            ctx.strokeStyle = m.color;
            ctx.fillStyle = m.color;
            ctx.lineWidth = 2 * dpr;
            ctx.beginPath();
            ctx.moveTo(x, u.bbox.top);
            ctx.lineTo(x, u.bbox.top + u.bbox.height);
            ctx.stroke();
            const right = x + 140 * dpr < u.bbox.left + u.bbox.width;
            ctx.textAlign = right ? "left" : "right";
            ctx.fillText(m.label, x + (right ? 4 : -4) * dpr, u.bbox.top + (14 + 14 * (i % 3)) * dpr);
          });
          ctx.restore();
        }],
      },
    }, data, chartEl);
  }
  if (typeof ResizeObserver !== "undefined") {
    new ResizeObserver(() => plot && plot.setSize(size())).observe(chartEl);
  }
  const lrText = (lr) => String(+lr.toPrecision(3));

  if (!(await startPython(client, setStatus, [runButton, applyButton]))) return;
  reset(1);
  wireStop(stopButton, client, message, () => running);

  applyForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!running) return;
    const input = applyForm.elements.new_lr;
    try {
      const change = await client.call("schedule_lrchange_set", { new_lr: input.value });
      input.removeAttribute("aria-invalid");
      applyMessage.textContent = "";
      marks.push({ step: change.step, label: `lr → ${lrText(change.lr)} at step ${change.step}`, color: COLORS.change });
      readouts.changes.textContent = String(marks.filter((m) => m.color === COLORS.change).length);
      plot.redraw();
    } catch (err) {
      input.setAttribute("aria-invalid", "true");
      applyMessage.textContent = err.kind === "input" && err.errors ? Object.values(err.errors).join("\n") : err.message;
    }
  });

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (running) return;
    running = true;
    runButton.disabled = true;
    stopButton.disabled = false;
    delete root.dataset.result;
    delete root.dataset.diverged;
    for (const name of ["lr", "seed"]) form.elements[name].removeAttribute("aria-invalid");
    applyForm.elements.new_lr.removeAttribute("aria-invalid");
    applyMessage.textContent = "";
    for (const el of Object.values(readouts)) el.textContent = "–";
    readouts.changes.textContent = "0";
    marks = [];
    setStatus("running", "Starting…");
    const onEvent = (ev) => {
      if (ev.kind === "start") {
        reset(ev.info.steps);
        applyButton.disabled = false;
      } else if (ev.kind === "chunk") {
        const c = ev.chunk;
        for (const r of c.records) {
          if (r.step >= data[0].length || r.diverged) continue; // a diverged step is labelled, never drawn
          data[1][r.step] = r.loss;
          if (r.val != null) data[2][r.step] = r.val;
          data[3][r.step] = r.lr;
        }
        if (c.diverged_at != null && !marks.some((m) => m.color === COLORS.diverged)) {
          marks.push({ step: c.diverged_at, label: `diverged at step ${c.diverged_at}`, color: COLORS.diverged });
        }
        plot.setData(data);
        const last = c.records.filter((r) => !r.diverged).pop();
        if (last) {
          readouts.step.textContent = String(last.step + 1);
          readouts.loss.textContent = last.loss == null ? "–" : last.loss.toFixed(3);
          readouts.lr.textContent = lrText(last.lr);
        }
        const val = c.records.filter((r) => r.val != null).pop();
        if (val) readouts.val.textContent = val.val.toFixed(3);
        if (!c.done) message.textContent = `Training… step ${c.step} of ${c.steps}. Type a new rate below and press Apply.`;
      }
    };
    try {
      const value = await client.call("run:schedule_lrchange", { lr: form.elements.lr.value, seed: form.elements.seed.value }, { onEvent });
      const r = value.result;
      const changes = r.changes.map((c) => `${lrText(c.lr)} at step ${c.step}`).join(", ") || "none";
      if (r.diverged_at != null) {
        root.dataset.result = JSON.stringify(r);
        root.dataset.diverged = "true";
        setStatus("done", `Diverged at step ${r.diverged_at}: the loss passed 2 ln V or stopped being a number, so the run ended. Changes: ${changes}.`);
      } else if (value.stopped) {
        setStatus("stopped", `Stopped at step ${r.steps}. Changes: ${changes}. Press Start to train again from step 0.`);
      } else {
        root.dataset.result = JSON.stringify(r);
        setStatus("done", `Done: ${r.steps} steps, final validation loss ${r.final_val == null ? "–" : r.final_val.toFixed(3)}. Changes: ${changes}.`);
      }
    } catch (err) {
      if (err.kind === "input" && err.errors) {
        for (const name of Object.keys(err.errors)) form.elements[name]?.setAttribute("aria-invalid", "true");
        setStatus("error", Object.values(err.errors).join("\n"));
      } else {
        setStatus("error", err.message);
      }
    } finally {
      running = false;
      runButton.disabled = false;
      stopButton.disabled = true;
      applyButton.disabled = true;
    }
  });
  runButton.disabled = false;
  setStatus("ready", "Ready. Press Start, then change the learning rate while it runs.");
}
