// The narrow valley: a thin view over optim_valley (pylib.web.optim_ops -> pylib.studies.quadratic), which
// validates the fields and returns the contours and both trajectories. This module only draws.

import { invalidMarker, startPython, statusSetter, widgetParts } from "../widget-kit.js";

const SVG = "http://www.w3.org/2000/svg";
const W = 600;
const H = 180;
const FIELDS = ["lr", "kappa", "momentum", "steps"];

export async function mount(root, client) {
  const { $, form, message, runButton } = widgetParts(root);
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(FIELDS, (name) => form.elements[name]);
  const readout = (key, text) => { $(`[data-readout="${key}"]`).textContent = text; };
  let request = 0; // only the latest request is drawn
  let timer = null;

  const el = (name, attrs) => {
    const node = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
    return node;
  };

  function draw(value) {
    const [x0, x1, y0, y1] = value.view;
    const px = (x) => ((x - x0) / (x1 - x0)) * W;
    const py = (y) => ((y1 - y) / (y1 - y0)) * H;
    const points = (xs, ys) => xs.map((x, i) => `${px(x).toFixed(2)},${py(ys[i]).toFixed(2)}`).join(" ");
    const contours = $('[data-role="contours"]');
    contours.replaceChildren(...value.contours.map((c) => el("polyline", { points: points(c.xs, c.ys), class: "valley-contour" })));
    for (const name of ["sgd", "momentum"]) {
      const t = value[name];
      const group = $(`[data-role="path-${name}"]`);
      const nodes = [el("polyline", { points: points(t.xs, t.ys) })];
      const every = Math.max(1, Math.floor(t.xs.length / 60)); // dots: at most about 60 per path
      for (let i = 0; i < t.xs.length; i += every) nodes.push(el("circle", { cx: px(t.xs[i]).toFixed(2), cy: py(t.ys[i]).toFixed(2), r: 2 }));
      if (t.diverged_at != null) {
        const last = t.xs.length - 1;
        const label = el("text", {
          x: Math.min(Math.max(px(t.xs[last]), 8), W - 150).toFixed(1),
          y: Math.min(Math.max(py(t.ys[last]) + (name === "sgd" ? -8 : 16), 14), H - 6).toFixed(1),
          class: "valley-diverged",
        });
        label.textContent = `diverged at step ${t.diverged_at}`;
        nodes.push(label);
      }
      group.replaceChildren(...nodes);
    }
    const start = $('[data-role="start"]');
    start.setAttribute("cx", px(value.start[0]));
    start.setAttribute("cy", py(value.start[1]));
    const mx = px(0);
    const my = py(0);
    $('[data-role="minimum"]').setAttribute("d", `M${mx - 5},${my - 5}L${mx + 5},${my + 5}M${mx - 5},${my + 5}L${mx + 5},${my - 5}`);
  }

  const describe = (t) => {
    if (t.diverged_at != null) return `diverged at step ${t.diverged_at}`;
    const ratio = t.final / t.f0;
    const reached = t.converged_at != null ? `; below ${config.tolerance} × start at step ${t.converged_at}` : "";
    return `f / f₀ = ${ratio.toExponential(1)}${reached}`;
  };
  const config = JSON.parse($('[data-role="config"]').textContent);

  // data-busy is set while a redraw is pending or in flight, so a reader (or a test) can tell
  // that the figure is about to change.
  async function update() {
    const id = ++request;
    root.dataset.busy = "true";
    const args = Object.fromEntries(FIELDS.map((f) => [f, form.elements[f].value]));
    try {
      const value = await client.call("optim_valley", args);
      if (id !== request) return;
      markInvalid(null);
      draw(value);
      readout("sgd", describe(value.sgd));
      readout("momentum", describe(value.momentum));
      readout("stable", value.stable_lr.toFixed(2));
      const summary = (t) => ({ diverged_at: t.diverged_at, converged_at: t.converged_at, final: t.final, f0: t.f0, points: t.xs.length });
      root.dataset.result = JSON.stringify({ settings: value.settings, sgd: summary(value.sgd), momentum: summary(value.momentum) });
      const diverged = ["sgd", "momentum"].filter((n) => value[n].diverged_at != null);
      setStatus("done", diverged.length
        ? `${diverged.map((n) => (n === "sgd" ? "Gradient descent" : "Momentum")).join(" and ")} diverged: the learning rate is too large for the steep direction.`
        : "Drawn. Drag a slider or type a value.");
    } catch (err) {
      if (id !== request) return;
      delete root.dataset.result;
      markInvalid(err.errors);
      setStatus("error", err.errors ? Object.values(err.errors).join("\n") : err.message);
    } finally {
      if (id === request && timer === null) delete root.dataset.busy;
    }
  }
  const soon = () => {
    root.dataset.busy = "true";
    clearTimeout(timer);
    timer = setTimeout(() => { timer = null; update(); }, 60);
  };

  if (!(await startPython(client, setStatus, [runButton]))) return;

  // The sliders move on log10 of the value; the text fields hold the value that is sent.
  const pairs = [["lr_slider", "lr", 3], ["kappa_slider", "kappa", 3]];
  for (const [slider, field, digits] of pairs) {
    form.elements[slider].addEventListener("input", () => {
      form.elements[field].value = String(Number((10 ** Number(form.elements[slider].value)).toPrecision(digits)));
      soon();
    });
    form.elements[field].addEventListener("input", () => {
      const v = Number(form.elements[field].value);
      if (Number.isFinite(v) && v > 0) form.elements[slider].value = String(Math.log10(v));
    });
  }
  for (const f of FIELDS) form.elements[f].addEventListener("change", soon);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    update();
  });
  form.elements.lr_slider.value = String(Math.log10(Number(form.elements.lr.value)));
  form.elements.kappa_slider.value = String(Math.log10(Number(form.elements.kappa.value)));
  runButton.disabled = false;
  await update();
}
