// One pair of texts through the chapter's deduplication: a view over pylib.web.data_ops's
// data_dedup_pair (pylib.studies.dedup.compare_pair computes every number shown), through the kit's
// calculator: Compare, the example list and the sliders each ask again (the latest answer wins).
// Text is set with textContent only; the reader's texts never become HTML.

import { bindFields, calculator, readConfig, readoutMap } from "../widget-kit.js";
import { keepFocus, lineChart } from "./data-svg.js";

const FIELDS = ["text_a", "text_b", "k", "n_hashes", "bands"];

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const config = readConfig(root);
  const readouts = readoutMap(root);
  const curve = lineChart($('[data-role="curve"]'));
  let examples = [];

  const chip = (text, cls) => {
    const span = document.createElement("span");
    span.className = cls;
    span.textContent = text;
    return span;
  };

  const clearOutputs = () => {
    for (const node of Object.values(readouts)) node.textContent = "–";
    for (const role of ["norm-a", "norm-b", "bands", "shingles-a", "shingles-b", "shingle-note", "verdict"]) $(`[data-role="${role}"]`).replaceChildren();
  };

  const show = (r) => {
    readouts.sizes.textContent = `${r.n_shingles[0].toLocaleString("en")} / ${r.n_shingles[1].toLocaleString("en")}`;
    readouts.jaccard.textContent = `${r.jaccard.toFixed(3)} (${r.n_shared.toLocaleString("en")}/${r.n_union.toLocaleString("en")})`;
    readouts.estimate.textContent = `${r.estimate.toFixed(3)} (${r.agreeing}/${r.n_hashes}) ± ${r.standard_error.toFixed(3)}`;
    readouts.bands.textContent = `${r.bands} × ${r.rows}` + (r.unused_hashes ? ` (+${r.unused_hashes} unused)` : "");
    readouts.p.textContent = r.p_candidate.toFixed(3);
    $('[data-role="norm-a"]').textContent = r.normalised[0];
    $('[data-role="norm-b"]').textContent = r.normalised[1];
    const shared = new Set(r.shared_bands);
    $('[data-role="bands"]').replaceChildren(...Array.from({ length: r.bands }, (_, i) => {
      const box = chip(String(i), shared.has(i) ? "dd-band shared" : "dd-band");
      box.title = shared.has(i) ? `band ${i}: all ${r.rows} rows agree` : `band ${i}: some row differs`;
      return box;
    }));
    const inBoth = new Set(r.shared);
    for (const [i, role] of [[0, "shingles-a"], [1, "shingles-b"]]) {
      $(`[data-role="${role}"]`).replaceChildren(...r.shingles[i].map((s) => chip(s.replace(/ /g, "␣"), inBoth.has(s) ? "sh shared" : "sh")));
    }
    $('[data-role="shingle-note"]').textContent = "Spaces are shown as ␣. " + (r.shingles_truncated.some((t) => t)
      ? `Only the first ${config.shown} shingles of each text (in sorted order) are shown; all of them are counted above.`
      : "");
    const at = (s) => { // P(candidate) on the drawn curve nearest to similarity s
      let best = 0;
      r.curve_s.forEach((x, i) => { if (Math.abs(x - s) < Math.abs(r.curve_s[best] - s)) best = i; });
      return r.curve_p[best];
    };
    curve([
      { xs: r.curve_s, ys: r.curve_p, color: 1, label: "P(candidate)" },
      { xs: [r.threshold, r.threshold], ys: [0, 1], color: "axis", dash: "6 4", width: 1.5, label: "threshold" },
      { xs: [r.jaccard, r.jaccard], ys: [0, 1], color: 2, label: "this pair's Jaccard" },
      { xs: [r.jaccard], ys: [r.p_candidate], color: 2, dots: true, label: "this pair's P(candidate)" },
    ], {
      xlabel: "Jaccard similarity s", ylabel: "P(candidate)", xmin: 0, xmax: 1, ymin: 0, ymax: 1,
      summary: `With ${r.bands} bands of ${r.rows} rows, a pair of similarity 0.5 becomes a candidate with probability ${at(0.5).toFixed(3)}, ` +
        `one at the threshold ${r.threshold} with ${at(r.threshold).toFixed(3)}; this pair (exact Jaccard ${r.jaccard.toFixed(3)}) with ${r.p_candidate.toFixed(3)}.`,
    });
    const verdict = $('[data-role="verdict"]');
    const bandText = r.candidate ? `shares ${r.shared_bands.length} of ${r.bands} bands` : `shares none of the ${r.bands} bands`;
    verdict.textContent = `Verdict at threshold ${r.threshold}: ${r.verdict}. (The pair ${bandText}; its estimate is ${r.estimate.toFixed(3)}.)`;
    verdict.classList.toggle("kept", r.verdict === "near duplicate" || r.verdict === "exact duplicate");
  };

  // Fewer hash functions than bands is refused by pylib: moving n below b brings b down to n, and the
  // bands slider stops at n.
  const fields = bindFields(root, {
    onSlide(name, v) {
      const n = Number(fields.input("n_hashes").value);
      if (name === "n_hashes" && Number(fields.input("bands").value) > v) fields.set("bands", v);
      if (name === "bands" && Number.isInteger(n) && n >= 1 && v > n) fields.set("bands", n);
      calc.schedule();
    },
  });
  const calc = calculator(root, client, {
    op: "data_dedup_pair",
    fields,
    args: () => ({ ...Object.fromEntries(FIELDS.map((f) => [f, fields.input(f).value])), threshold: config.threshold }),
    onError: clearOutputs,
    onResult(r) {
      show(r);
      return {
        result: {
          jaccard: r.jaccard, estimate: r.estimate, standard_error: r.standard_error, p_candidate: r.p_candidate,
          n_shingles: r.n_shingles, n_shared: r.n_shared, n_union: r.n_union, bands: r.bands, rows: r.rows,
          shared_bands: r.shared_bands, candidate: r.candidate, verdict: r.verdict, normalised: r.normalised,
        },
        text: `Exact Jaccard ${r.jaccard.toFixed(3)}; MinHash estimate ${r.estimate.toFixed(3)} from ${r.n_hashes} hash functions: ${r.verdict}.`,
      };
    },
  });
  keepFocus(root);

  const select = fields.input("example");
  const loadExample = (i) => {
    const ex = examples[i];
    if (!ex) return;
    fields.set("text_a", ex.texts[0]);
    fields.set("text_b", ex.texts[1]);
  };

  if (!(await calc.ready(async () => { examples = (await client.call("data_dedup_examples", {})).examples; }))) return;
  select.replaceChildren(...examples.map((ex, i) => {
    const option = document.createElement("option");
    option.value = String(i);
    option.textContent = `${ex.name} (${ex.plays[0] === ex.plays[1] ? ex.plays[0] : ex.plays.join(", ")})`;
    return option;
  }));
  select.addEventListener("change", () => { loadExample(Number(select.value)); calc.schedule(); });
  loadExample(0);
  await calc.run();
}
