// Tensor parallelism step by step: a view over tp_example (pylib.systems.tensor_parallel.worked_example),
// the seed's two-device FFN, stepped with Back and Next; and tp_check (the form's Check), the course model
// split over 2 devices against the unsplit one.

import { calculator, readoutMap } from "../widget-kit.js";

const vec = (xs) => `[${xs.map((x) => String(x)).join(", ")}]`;

// Each step: the text, which rows each device shows (with the changed one highlighted), and the all-reduce line.
function steps(ex) {
  const d = ex.devices;
  const rows = (k) => d.map((dv) => ({
    "W1 column": vec(dv.w1_column), "W2 row": vec(dv.w2_row),
    ...(k >= 1 ? { "h = relu(x · column)": String(dv.h) } : {}),
    ...(k >= 2 ? { "partial y = h · row": vec(dv.partial_y) } : {}),
    ...(k >= 4 ? { "dh = dy · row": String(dv.dh) } : {}),
    ...(k >= 5 ? { "partial dx = dh · column": vec(dv.partial_dx) } : {}),
  }));
  const now = ["W1 column", "h = relu(x · column)", "partial y = h · row", null, "dh = dy · row", "partial dx = dh · column", null];
  const reduce = [
    `x = ${vec(ex.x)} is on both devices (Megatron's f: the identity in the forward).`,
    "No communication: each device computes its own hidden unit from the whole input.",
    "Neither partial y is the answer: each is one hidden unit's share of the output.",
    `All-reduce (sum), Megatron's g: ${vec(d[0].partial_y)} + ${vec(d[1].partial_y)} = ${vec(ex.y)}. The unsplit FFN gives ${vec(ex.y_unsplit)}.`,
    `Backward: dy = ${vec(ex.dy)} is on both devices (g's backward is the identity: no communication).`,
    "Each device's input gradient is partial: it saw only its own hidden unit.",
    `All-reduce (sum), f's backward: ${vec(d[0].partial_dx)} + ${vec(d[1].partial_dx)} = ${vec(ex.dx)}. The unsplit backward gives ${vec(ex.dx_unsplit)}.`,
  ];
  const text = [
    "Step 1 of 7. Column split: W1's columns are divided between the devices, W2's rows likewise.",
    "Step 2 of 7. Forward, first matmul: each device multiplies the whole x by its column of W1.",
    "Step 3 of 7. Forward, second matmul: each device multiplies its hidden unit by its row of W2.",
    "Step 4 of 7. The forward's one all-reduce.",
    "Step 5 of 7. Backward through the row-split matmul: each device needs only dy and its own row.",
    "Step 6 of 7. Backward through the column-split matmul.",
    "Step 7 of 7. The backward's one all-reduce, on the input gradient.",
  ];
  return text.map((t, k) => ({ text: t, rows: rows(k), now: now[k], reduce: reduce[k], reduceNow: k === 3 || k === 6 }));
}

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const back = $('[data-action="back"]'), next = $('[data-action="next"]');
  const readouts = readoutMap(root);
  let ex = null, all = [], k = 0, t0 = 0;

  function show() {
    const s = all[k];
    $('[data-role="step-text"]').textContent = s.text;
    for (const dev of [0, 1]) {
      const dl = $(`[data-role="dev${dev}"]`);
      dl.replaceChildren();
      for (const [name, value] of Object.entries(s.rows[dev])) {
        const dt = document.createElement("dt"), dd = document.createElement("dd");
        dt.textContent = name;
        dd.textContent = value;
        if (name === s.now) dd.className = "mp-now";
        dl.append(dt, dd);
      }
    }
    const reduce = $('[data-role="reduce"]');
    reduce.textContent = s.reduce;
    reduce.classList.toggle("mp-now", s.reduceNow);
    // a button that is pressed and becomes disabled hands its focus to the other one (never to <body>)
    const focused = document.activeElement;
    back.disabled = k === 0;
    next.disabled = k === all.length - 1;
    if (focused === next && next.disabled) back.focus();
    if (focused === back && back.disabled) next.focus();
    root.dataset.step = String(k + 1);
    root.dataset.example = JSON.stringify({ y: ex.y, dx: ex.dx, y_unsplit: ex.y_unsplit, dx_unsplit: ex.dx_unsplit });
  }

  const calc = calculator(root, client, {
    op: "tp_check",
    args() { t0 = performance.now(); return {}; },
    runningText: "Running the course model on two simulated devices…",
    onResult(r) {
      const ms = performance.now() - t0;
      readouts.diff.textContent = `${r.max_rel_grad_diff.toExponential(1)} of the largest entry (float64)`;
      readouts.per_block.textContent = `${r.per_block} (2 forward, 2 backward)`;
      readouts.bytes.textContent = `${r.bytes_each.toLocaleString("en")} bytes: one (${r.batch}, ${r.seq}, ${r.width}) activation in float64`;
      return {
        result: { ...r, log: undefined, ms },
        text: `Split over two devices, the ${r.n_layer}-layer model's loss is ${r.tp_loss.toFixed(6)} ` +
          `(unsplit ${r.loss.toFixed(6)}); ${r.all_reduces} all-reduces in all.`,
      };
    },
  });

  next.addEventListener("click", () => { if (k < all.length - 1) { k += 1; show(); } });
  back.addEventListener("click", () => { if (k > 0) { k -= 1; show(); } });
  if (!(await calc.ready(async () => { ex = await client.call("tp_example", {}); }))) return;
  all = steps(ex);
  show();
  calc.setStatus("done", "Step through with Next step, or check the split on the course model.", false);
}
