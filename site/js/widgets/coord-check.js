// The µP coordinate check: a thin view over the chunked run:init_coord (pylib.web.init_ops ->
// pylib.studies.init_study.coord_check), one width per chunk, drawn over the measured curves.

import { invalidMarker, showRunError, readConfig, startPython, statusSetter, widgetParts, wireStop } from "../widget-kit.js";
import { drawChart } from "./init-plot.js";

const COLORS = { sp: "#2a5db0", mup: "#d9480f" };
const NAMES = { sp: "SP", mup: "µP" };

export async function mount(root, client) {
  const { $, form, message, runButton, stopButton } = widgetParts(root);
  const config = readConfig(root);
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(["lr", "seed"], (name) => form.elements[name]);
  const divergedNote = $('[data-role="diverged"]');
  let running = false;
  let items = [];

  function draw() {
    const key = form.elements.quantity.value;
    const t = Number(form.elements.step.value);
    const series = [];
    for (const p of ["sp", "mup"]) {
      const m = config[p];
      if (m) series.push({ xs: m.widths, ys: m[key].map((row) => row[t]), color: COLORS[p], dash: "5 4", width: 1, hollow: true, name: `measured-${p}` });
      const live = items.filter((it) => it.param === p);
      series.push({ xs: live.map((it) => it.width), ys: live.map((it) => it[key][t]), color: COLORS[p], name: p });
    }
    const widths = (config.sp && config.sp.widths) || [...new Set(items.map((it) => it.width))];
    drawChart($('[data-role="chart"]'), series, {
      xlog: true, ylog: true, xlabel: "width (n_embd)", ylabel: "RMS of a coordinate",
      xticks: widths.map((w) => ({ value: w, text: String(w) })), empty: "Press Start to run the check.",
    });
    const diverged = items.filter((it) => it.diverged_at != null);
    divergedNote.hidden = !diverged.length;
    divergedNote.textContent = diverged.map((it) => `${NAMES[it.param]}, width ${it.width}: diverged at step ${it.diverged_at}`).join("; ") +
      (diverged.length ? ". Sizes after that step are not drawn." : "");
  }
  for (const name of ["quantity", "step"]) form.elements[name].addEventListener("change", draw);

  if (!(await startPython(client, setStatus, [runButton]))) return;
  draw();
  wireStop(stopButton, client, message, () => running);

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (running) return;
    running = true;
    runButton.disabled = true;
    stopButton.disabled = false;
    markInvalid(null);
    delete root.dataset.result;
    items = [];
    draw();
    setStatus("running", "Starting…");
    const onEvent = (ev) => {
      if (ev.kind === "chunk") {
        items.push(ev.chunk.item);
        draw();
        message.textContent = `Running… ${ev.chunk.n_done} of ${ev.chunk.jobs} (${NAMES[ev.chunk.item.param]}, width ${ev.chunk.item.width} done).`;
      }
    };
    try {
      const value = await client.call("run:init_coord", { lr: form.elements.lr.value, seed: form.elements.seed.value }, { onEvent });
      const r = value.result;
      items = r.items;
      draw();
      if (value.stopped) {
        setStatus("stopped", `Stopped after ${r.items.length} runs; the chart shows those. Press Start to run the check again.`);
      } else {
        root.dataset.result = JSON.stringify({ lr: r.lr, seed: r.seed, items: r.items });
        const diverged = r.items.filter((it) => it.diverged_at != null).length;
        setStatus("done", `Done: ${r.items.length} runs at learning rate ${r.lr}` + (diverged ? `; ${diverged} diverged (see below).` : "."));
      }
    } catch (err) {
      showRunError(err, setStatus, markInvalid);
    } finally {
      running = false;
      runButton.disabled = false;
      stopButton.disabled = true;
    }
  });
  runButton.disabled = false;
  setStatus("ready", "Ready. Press Start: each width trains a few steps in this page.");
}
