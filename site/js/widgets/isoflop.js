// The IsoFLOP explorer: a thin view over scaling_isoflop (pylib.web.scaling_ops -> pylib.studies.scaling).
// The measured sweep comes from the page (results.json at build time); pylib fits it; this file draws.

import { readConfig, readoutMap, showRunError, startPython, statusSetter, widgetParts, invalidMarker } from "../widget-kit.js";

const W_MAX = 640, W_MIN = 320, H = 300, PAD = { l: 56, r: 16, t: 14, b: 40 };
const fmtInt = (v) => (v >= 1e6 ? v.toExponential(2) : Math.round(v).toLocaleString("en"));
const NS = "http://www.w3.org/2000/svg";

function el(name, attrs, text) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

// Points in data space -> the SVG: x on a log scale of N, y linear in loss.
// The drawing takes the plot's width on the page (W_MIN to W_MAX units), so its 11px labels stay legible on a phone.
function draw(svg, v, seeds) {
  svg.replaceChildren();
  const W = Math.round(Math.min(W_MAX, Math.max(W_MIN, svg.getBoundingClientRect().width || W_MAX)));
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  const xs = [...v.n, ...(v.curve ? v.curve.n : [])];
  const ys = [...v.loss, ...seeds.flat(), ...(v.curve ? v.curve.loss : [])];
  const [x0, x1] = [Math.log(Math.min(...xs)) - 0.15, Math.log(Math.max(...xs)) + 0.15];
  const [y0, y1] = [Math.min(...ys) - 0.02, Math.max(...ys) + 0.02];
  const px = (n) => PAD.l + ((Math.log(n) - x0) / (x1 - x0)) * (W - PAD.l - PAD.r);
  const py = (y) => H - PAD.b - ((y - y0) / (y1 - y0)) * (H - PAD.t - PAD.b);
  svg.append(el("line", { class: "axis", x1: PAD.l, y1: H - PAD.b, x2: W - PAD.r, y2: H - PAD.b }));
  svg.append(el("line", { class: "axis", x1: PAD.l, y1: PAD.t, x2: PAD.l, y2: H - PAD.b }));
  let lastLabel = -Infinity; // a size's label is left out when it would touch the previous one (narrow screens)
  for (const n of [...v.n].sort((p, q) => p - q)) {
    if (px(n) - lastLabel < 44) continue;
    svg.append(el("text", { class: "tick", x: px(n), y: H - PAD.b + 14, "text-anchor": "middle" }, fmtInt(n)));
    lastLabel = px(n);
  }
  svg.append(el("text", { class: "tick", x: (W + PAD.l) / 2, y: H - 6, "text-anchor": "middle" }, "parameters N (log scale)"));
  for (let i = 0; i <= 4; i++) {
    const y = y0 + ((y1 - y0) * i) / 4;
    svg.append(el("text", { class: "tick", x: PAD.l - 6, y: py(y) + 4, "text-anchor": "end" }, y.toFixed(2)));
  }
  svg.append(el("text", { class: "tick", x: 12, y: PAD.t + 8, transform: `rotate(-90 12 ${PAD.t + 8})`, "text-anchor": "end" }, "final val loss"));
  seeds.forEach((row, i) => row.forEach((y) => svg.append(el("circle", { class: "seed", cx: px(v.n[i]), cy: py(y), r: 3.5 }))));
  v.loss.forEach((y, i) => svg.append(el("circle", { class: "mean", cx: px(v.n[i]), cy: py(y), r: 5 })));
  if (v.curve) {
    const d = v.curve.n.map((n, i) => `${i ? "L" : "M"}${px(n).toFixed(1)},${py(v.curve.loss[i]).toFixed(1)}`).join("");
    svg.append(el("path", { class: "fit", d }));
  }
  if (v.optimum && v.optimum.inside) {
    const x = px(v.optimum.n);
    svg.append(el("line", { class: "opt-line", x1: x, y1: PAD.t, x2: x, y2: H - PAD.b }));
    svg.append(el("circle", { class: "opt", cx: x, cy: py(v.optimum.loss), r: 6 }));
  }
}

export async function mount(root, client) {
  const { $, form, message, runButton } = widgetParts(root);
  if (!form) return; // no measured sweep: the template says so
  const config = readConfig(root);
  const readouts = readoutMap(root);
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(["custom_budget"], (name) => form.elements[name]);
  const warn = $('[data-role="warn"]');
  let busy = false;

  async function fit() {
    if (busy) return;
    busy = true;
    markInvalid(null);
    setStatus("running", "Fitting…");
    const index = Number(form.elements.budget_index.value);
    try {
      const v = await client.call("scaling_isoflop", {
        series: config.series, budget_index: index, custom_budget: form.elements.custom_budget.value,
      });
      draw($('[data-role="plot"]'), v, config.series[index].loss_per_seed);
      $('[data-role="readouts"]').hidden = false;
      const o = v.optimum;
      readouts.n_opt.textContent = o ? fmtInt(o.n) + (o.inside ? "" : " (outside the sizes run)") : "no minimum";
      readouts.d_opt.textContent = o ? fmtInt(o.d) : "–";
      readouts.loss_opt.textContent = o ? o.loss.toFixed(3) : "–";
      readouts.exponents.textContent = v.laws ? `N ∝ C^${v.laws.a.toFixed(2)}, D ∝ C^${v.laws.b.toFixed(2)}` : "–";
      const p = v.prediction;
      readouts.prediction.textContent = p ? `N ≈ ${fmtInt(p.n)}, D ≈ ${fmtInt(p.d)}` : "–";
      warn.hidden = !(p && p.extrapolated);
      if (p && p.extrapolated) {
        warn.textContent = `Extrapolation: ${p.budget.toExponential(2)} FLOPs is ${p.decades_out.toFixed(1)} decades outside the measured budgets. The power law is a straight line through ${v.laws.budgets.length} points; nothing in this toy says it stays straight.`;
      }
      root.dataset.result = JSON.stringify(v);
      setStatus("done", o ? "Fitted. Change the budget, or type another budget to predict." : "This budget's points have no minimum.");
    } catch (err) {
      showRunError(err, setStatus, markInvalid);
    } finally {
      busy = false;
    }
  }

  form.addEventListener("submit", (event) => { event.preventDefault(); fit(); });
  if (!(await startPython(client, setStatus, [runButton]))) return;
  await fit(); // the last budget, before the reader can press anything
  runButton.addEventListener("click", fit);
  form.elements.budget_index.addEventListener("change", fit);
  runButton.disabled = false;
}
