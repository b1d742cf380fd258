// A live run whose peak learning rate the reader changes mid-run: a thin view over
// run:schedule_lrchange and schedule_lrchange_set (pylib.web.schedule_ops). The worker handles the
// set call between two chunks, so the change applies from the next step; the chart marks it.

import { bindFields, checkOnLeave, markSettled, readoutMap, reportError, runStreamed } from "../widget-kit.js";
import { AXIS_FONT_PX, Plot, cssColor, fmtCell } from "../plot.js";

/** plot.js's Plot with a second y axis on the right (scale "lr") for the learning rate, series 3.
 *  (Plot has one y axis; what a second one needs is here, until the kit has it.) */
class LossLrPlot extends Plot {
  uplotOptions() {
    const o = super.uplotOptions();
    o.scales.lr = { range: (u, lo, hi) => [0, (hi || 1) * 1.1] };
    o.series[3].scale = "lr";
    o.axes.push({ ...o.axes[1], scale: "lr", side: 1, label: "learning rate", grid: { show: false }, size: 64 });
    return o;
  }
}

const lrText = (lr) => String(+lr.toPrecision(3));

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const apply = $('[data-role="apply"]');
  const applyForm = apply.querySelector("form");
  const applyButton = $('[data-action="apply"]');
  const chartEl = $('[data-role="chart"]');
  const readouts = readoutMap(root);
  const fields = bindFields($('[data-role="run"]')); // each form with its own fields (the template's two boxes)
  const applyFields = bindFields(apply);
  let plot = null;
  let data = [[], [], [], []];
  let marks = []; // [{step, label, kind: "change" | "diverged"}]

  // The marks: a vertical line and a label (12 px) per change of rate, and where the run diverged.
  const drawMarks = (u) => {
    const ctx = u.ctx;
    const dpr = window.devicePixelRatio || 1;
    ctx.save();
    ctx.font = `${AXIS_FONT_PX * dpr}px system-ui, sans-serif`;
    marks.forEach((m, i) => {
      const color = m.kind === "change" ? cssColor("--series-5") : cssColor("--error");
      const x = u.valToPos(m.step, "x", true);
      ctx.strokeStyle = color;
      ctx.fillStyle = color;
      ctx.lineWidth = 2 * dpr;
      ctx.beginPath();
      ctx.moveTo(x, u.bbox.top);
      ctx.lineTo(x, u.bbox.top + u.bbox.height);
      ctx.stroke();
      const right = x + 150 * dpr < u.bbox.left + u.bbox.width;
      ctx.textAlign = right ? "left" : "right";
      ctx.fillText(m.label, x + (right ? 4 : -4) * dpr, u.bbox.top + (14 + 15 * (i % 3)) * dpr);
    });
    ctx.restore();
  };

  function reset(n) {
    data = [Array.from({ length: n }, (_, i) => i), new Array(n).fill(null), new Array(n).fill(null), new Array(n).fill(null)];
    if (plot) plot.destroy();
    plot = new LossLrPlot(chartEl, {
      x: { label: "step" },
      y: { label: "loss (nats/token)" },
      series: [
        { label: "train loss", color: 1, width: 1 },
        { label: "val loss", color: 2, points: true, size: 7 },
        { label: "learning rate", color: 4, width: 1.5, dash: [2, 3] },
      ],
      hooks: { draw: [drawMarks] },
    });
  }

  function describe() {
    let last = -1;
    for (let i = data[0].length - 1; i >= 0; i--) if (data[1][i] != null) { last = i; break; }
    if (last < 0) { plot.describe("No steps yet."); return; }
    let val = null;
    for (let i = last; i >= 0; i--) if (data[2][i] != null) { val = i; break; }
    const changes = marks.filter((m) => m.kind === "change").map((m) => m.label.replace("lr → ", "")).join(", ");
    const diverged = marks.find((m) => m.kind === "diverged");
    plot.describe(`Step ${last}: batch loss ${fmtCell(data[1][last])}, learning rate ${fmtCell(data[3][last])}` +
      (val != null ? `; validation loss ${fmtCell(data[2][val])} at step ${val}` : "") +
      `. Changes of rate: ${changes || "none"}.` + (diverged ? ` It ${diverged.label}.` : ""));
  }

  // Apply's call, once answered, counts on data-settles (markSettled) like any ended call: the run goes
  // on and its status stays "running", so the count is how a reader of the page tells a new answer
  // (a new error under the field, say) from the last one. (An error shown as the status counts there.)
  applyForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!run.running) return;
    let counted = false;
    try {
      const change = await client.call("schedule_lrchange_set", applyFields.values());
      applyFields.clearErrors();
      marks.push({ step: change.step, label: `lr → ${lrText(change.lr)} at step ${change.step}`, kind: "change" });
      readouts.changes.textContent = String(marks.filter((m) => m.kind === "change").length);
      run.announcer.say(`Learning rate set to ${lrText(change.lr)} from step ${change.step}.`);
      if (plot.u) plot.u.redraw();
      describe();
    } catch (err) {
      if (err.kind === "input" && err.errors) {
        const unplaced = applyFields.setErrors(err.errors); // the run goes on: its status line is left alone
        run.announcer.say(Object.values(err.errors).join(" "));
        if (Object.keys(unplaced).length) run.setStatus("running", Object.values(unplaced).join("\n"), "now");
      } else {
        reportError(err, { fields: applyFields, setStatus: run.setStatus });
        counted = true; // an "error" status counts itself
      }
    } finally {
      if (!counted) markSettled(root);
    }
  });

  const run = runStreamed(root, client, {
    op: "run:schedule_lrchange",
    fields,
    args: () => fields.values(),
    announceStart: "Training started. Type a new rate below and press Apply.",
    onStart() {
      delete root.dataset.diverged;
      applyFields.clearErrors();
      for (const el of Object.values(readouts)) el.textContent = "–";
      readouts.changes.textContent = "0";
      marks = [];
    },
    onEvent(ev) {
      if (ev.kind === "start") {
        reset(ev.info.steps);
        applyButton.disabled = false;
        return null;
      }
      if (ev.kind !== "chunk") return null;
      const c = ev.chunk;
      for (const r of c.records) {
        if (r.step >= data[0].length || r.diverged) continue; // a diverged step is labelled, never drawn
        data[1][r.step] = r.loss;
        if (r.val != null) data[2][r.step] = r.val;
        data[3][r.step] = r.lr;
      }
      if (c.diverged_at != null && !marks.some((m) => m.kind === "diverged")) {
        marks.push({ step: c.diverged_at, label: `diverged at step ${c.diverged_at}`, kind: "diverged" });
      }
      plot.setData(data);
      describe();
      const last = c.records.filter((r) => !r.diverged).pop();
      if (last) {
        readouts.step.textContent = String(last.step + 1);
        readouts.loss.textContent = last.loss == null ? "–" : last.loss.toFixed(3);
        readouts.lr.textContent = lrText(last.lr);
      }
      const val = c.records.filter((r) => r.val != null).pop();
      if (val) readouts.val.textContent = val.val.toFixed(3);
      return c.done ? null : `Training… step ${c.step} of ${c.steps}. Type a new rate below and press Apply.`;
    },
    onResult(value) {
      applyButton.disabled = true;
      const r = value.result;
      const changes = r.changes.map((c) => `${lrText(c.lr)} at step ${c.step}`).join(", ") || "none";
      if (r.diverged_at != null) {
        root.dataset.diverged = "true";
        return { status: "done", result: r, text: `Diverged at step ${r.diverged_at}: the loss passed 2 ln V or stopped being a number, so the run ended. Changes: ${changes}.` };
      }
      if (value.stopped) return { status: "stopped", text: `Stopped at step ${r.steps}. Changes: ${changes}. Press Start to train again from step 0.` };
      return { status: "done", result: r, text: `Done: ${r.steps} steps, final validation loss ${r.final_val == null ? "–" : r.final_val.toFixed(3)}. Changes: ${changes}.` };
    },
    onError() { applyButton.disabled = true; },
  });
  // The new rate is checked when the reader leaves its field, as Apply checks it (runStreamed checks the
  // run's form): the value only; whether a run is going is Apply's to say.
  checkOnLeave(apply, { op: "schedule_lrchange_set", args: () => applyFields.values(), fields: applyFields });
  await run.ready(null, "Ready. Press Start, then change the learning rate while it runs.");
}
