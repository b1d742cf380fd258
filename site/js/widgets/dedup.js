// One pair of texts through the chapter's deduplication: a view over pylib.web.data_ops's
// data_dedup_pair (pylib.studies.dedup.compare_pair computes every number shown). Text is set with
// textContent only; the reader's texts never become HTML.

import { invalidMarker, readConfig, readoutMap, startPython, statusSetter, widgetParts } from "../widget-kit.js";
import { lineChart } from "./data-svg.js";

const FIELDS = ["text_a", "text_b", "k", "n_hashes", "bands"];

export async function mount(root, client) {
  const { $, form, message, runButton } = widgetParts(root);
  const config = readConfig(root);
  const readouts = readoutMap(root);
  const setStatus = statusSetter(root, message);
  const markInvalid = invalidMarker(FIELDS, (name) => form.elements[name]);
  const el = form.elements;
  let examples = [];
  let busy = false, again = false;

  const chip = (text, cls) => {
    const span = document.createElement("span");
    span.className = cls;
    span.textContent = text;
    return span;
  };

  const clearOutputs = () => {
    delete root.dataset.result;
    for (const node of Object.values(readouts)) node.textContent = "–";
    for (const role of ["norm-a", "norm-b", "bands", "shingles-a", "shingles-b", "shingle-note", "verdict"]) $(`[data-role="${role}"]`).replaceChildren();
    $('[data-role="curve"]').replaceChildren();
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
    lineChart($('[data-role="curve"]'), [
      { xs: r.curve_s, ys: r.curve_p, color: "#2a5db0" },
      { xs: [r.threshold, r.threshold], ys: [0, 1], color: "#9a9a9a" },
      { xs: [r.jaccard, r.jaccard], ys: [0, 1], color: "#d9480f" },
      { xs: [r.jaccard], ys: [r.p_candidate], color: "#d9480f", dots: true },
    ], { xmin: 0, xmax: 1, ymin: 0, ymax: 1, xlabel: "Jaccard similarity s", ylabel: "P(candidate)" });
    const verdict = $('[data-role="verdict"]');
    const bandText = r.candidate ? `shares ${r.shared_bands.length} of ${r.bands} bands` : `shares none of the ${r.bands} bands`;
    verdict.textContent = `Verdict at threshold ${r.threshold}: ${r.verdict}. (The pair ${bandText}; its estimate is ${r.estimate.toFixed(3)}.)`;
    verdict.classList.toggle("kept", r.verdict === "near duplicate" || r.verdict === "exact duplicate");
    root.dataset.result = JSON.stringify({
      jaccard: r.jaccard, estimate: r.estimate, standard_error: r.standard_error, p_candidate: r.p_candidate,
      n_shingles: r.n_shingles, n_shared: r.n_shared, n_union: r.n_union, bands: r.bands, rows: r.rows,
      shared_bands: r.shared_bands, candidate: r.candidate, verdict: r.verdict, normalised: r.normalised,
    });
  };

  const compare = async () => {
    if (busy) { again = true; return; }
    busy = true;
    try {
      do {
        again = false;
        markInvalid(null);
        setStatus("running", "Computing…");
        const args = Object.fromEntries(FIELDS.map((f) => [f, el[f].value]));
        try {
          const r = await client.call("data_dedup_pair", { ...args, threshold: config.threshold });
          show(r);
          setStatus("done", `Exact Jaccard ${r.jaccard.toFixed(3)}; MinHash estimate ${r.estimate.toFixed(3)} from ${r.n_hashes} hash functions.`);
        } catch (err) {
          clearOutputs();
          markInvalid(err.errors);
          setStatus("error", err.errors ? Object.values(err.errors).join("\n") : err.message);
        }
      } while (again);
    } finally {
      busy = false;
    }
  };

  // Sliders and number fields mirror each other; a slider recomputes at once.
  const syncBandsMax = () => {
    const n = Number(el.n_hashes.value);
    if (Number.isInteger(n) && n >= 1 && n <= Number(el.n_slider.max)) el.b_slider.max = String(n);
  };
  // Fewer hash functions than bands is refused by pylib; the slider keeps b <= n (the browser clamps b_slider).
  el.n_slider.addEventListener("input", () => {
    el.n_hashes.value = el.n_slider.value;
    syncBandsMax();
    if (Number(el.bands.value) > Number(el.n_hashes.value)) el.bands.value = el.b_slider.value;
    compare();
  });
  el.b_slider.addEventListener("input", () => { el.bands.value = el.b_slider.value; compare(); });
  el.n_hashes.addEventListener("change", () => { el.n_slider.value = el.n_hashes.value; syncBandsMax(); });
  el.bands.addEventListener("change", () => { el.b_slider.value = el.bands.value; });

  const loadExample = (i) => {
    const ex = examples[i];
    if (!ex) return;
    el.text_a.value = ex.texts[0];
    el.text_b.value = ex.texts[1];
  };

  if (!(await startPython(client, setStatus, [runButton]))) return;
  try {
    examples = (await client.call("data_dedup_examples", {})).examples;
  } catch (err) {
    setStatus("error", err.message);
    return;
  }
  el.example.replaceChildren(...examples.map((ex, i) => {
    const option = document.createElement("option");
    option.value = String(i);
    option.textContent = `${ex.name} (${ex.plays[0] === ex.plays[1] ? ex.plays[0] : ex.plays.join(", ")})`;
    return option;
  }));
  el.example.addEventListener("change", () => { loadExample(Number(el.example.value)); compare(); });
  form.addEventListener("submit", (event) => { event.preventDefault(); compare(); });
  loadExample(0);
  runButton.disabled = false;
  await compare();
}
