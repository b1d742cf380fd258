// Live BPE (pylib.bpe through pylib.web.data_ops's data_bpe_* ops, chunked and stoppable), on the kit's
// runStreamed. Merges and tokens are shown with textContent: pasted markup stays text.

import { bindFields, checkOnLeave, readConfig, readoutMap, reportError, runStreamed } from "../widget-kit.js";
import { lineChart } from "./data-svg.js";

const SHOWN = { "\n": "↵", " ": "␣" };
const show = (s) => [...s].map((ch) => SHOWN[ch] ?? ch).join("");
const f3 = (v) => v.toFixed(3);

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const config = readConfig(root);
  const excerptButton = $('[data-action="excerpt"]');
  const mergesList = $('[data-role="merges"]');
  const tokensBox = $('[data-role="tokens"]');
  const mergeTemplate = $('template[data-role="merge"]');
  const tokTemplate = $('template[data-role="tok"]');
  const readouts = readoutMap(root);
  const fields = bindFields(root);
  const split = fields.input("split");
  const chart = lineChart($('[data-role="chart"]'));
  let curve = { xs: [], ys: [] };
  // One form, two ops, each checked when the reader leaves a field: Learn merges' data_bpe_start (the
  // run's check) answers for text and vocab_size, Load corpus text's data_excerpt for start and n_chars;
  // neither touches the other's messages.
  const EXCERPT = ["start", "n_chars"];
  const shownErrors = () => Object.fromEntries(EXCERPT
    .map((n) => [n, root.querySelector(`[data-error-for="${n}"]`)?.textContent || ""]).filter(([, m]) => m));

  const draw = () => {
    const measured = split.checked ? config.measured_split : config.measured;
    const series = [{ xs: curve.xs, ys: curve.ys, color: 1, points: false, label: "this text: chars per token" }];
    const parts = [];
    if (curve.xs.length > 1) {
      const n = curve.xs.length - 1;
      parts.push(`This text: ${f3(curve.ys[0])} characters per token at vocabulary ${curve.xs[0]}, ${f3(curve.ys[n])} at ${curve.xs[n]}.`);
    } else {
      parts.push("No merges learnt yet: press Learn merges.");
    }
    if (measured) {
      const keep = (_, i) => i % 16 === 0;
      const xs = measured.vocab_size.filter(keep), ys = measured.chars_per_token.filter(keep);
      series.push({ xs, ys, color: 2, dots: true, label: "measured: validation plays" });
      parts.push(`Measured on the validation plays${split.checked ? ", within pre-tokens" : ""}: ${f3(ys[0])} at vocabulary ${xs[0]}, ` +
        `${f3(ys[ys.length - 1])} at ${xs[xs.length - 1]}.`);
    }
    if (!series.some((s) => s.xs.length)) return;
    chart(series, { xlabel: "vocabulary size", ylabel: "chars per token", ymin: 1, summary: parts.join(" ") });
  };

  const run = runStreamed(root, client, {
    op: "run:data_bpe",
    fields,
    args: () => ({ text: fields.input("text").value, vocab_size: fields.input("vocab_size").value, split: split.checked }),
    checkErrors: (errors) => ({ ...shownErrors(), ...errors }), // start's and n_chars' are the excerpt's
    startText: "Counting pairs…",
    announceStart: "Learning merges.",
    onStart() {
      excerptButton.disabled = true;
    },
    onClear() {
      mergesList.replaceChildren();
      tokensBox.replaceChildren();
      curve = { xs: [], ys: [] };
    },
    onEvent(ev) {
      if (ev.kind === "start") {
        readouts.base.textContent = ev.info.base_size;
        curve = { xs: [ev.info.base_size], ys: [1] };
        return null;
      }
      if (ev.kind !== "chunk") return null;
      for (const m of ev.chunk.merges) {
        const li = mergeTemplate.content.firstElementChild.cloneNode(true);
        li.querySelector(".m-pair").textContent = `${show(m.left)} + ${show(m.right)}`;
        li.querySelector(".m-token").textContent = show(m.token);
        li.querySelector(".m-count").textContent = `(${m.count}×, id ${m.id})`;
        mergesList.appendChild(li);
        curve.xs.push(m.vocab_size);
        curve.ys.push(m.chars_per_token);
      }
      const last = ev.chunk.merges[ev.chunk.merges.length - 1];
      if (last) {
        readouts.vocab.textContent = last.vocab_size;
        readouts.tokens.textContent = last.tokens.toLocaleString("en");
        readouts.cpt.textContent = f3(last.chars_per_token);
      }
      mergesList.scrollTop = mergesList.scrollHeight;
      draw();
      return `Learning… ${ev.chunk.n_merges} merges.`;
    },
    onResult({ result: r, stopped }) {
      excerptButton.disabled = false;
      tokensBox.replaceChildren(...r.tokens.map((t) => {
        const span = tokTemplate.content.firstElementChild.cloneNode(true);
        span.textContent = show(t);
        return span;
      }));
      readouts.vocab.textContent = r.vocab_size;
      readouts.tokens.textContent = r.n_tokens.toLocaleString("en");
      readouts.cpt.textContent = f3(r.chars_per_token);
      draw();
      const how = (stopped ? "Stopped" : `Done (${r.stop_reason})`) + (r.split ? ", within pre-tokens" : "");
      return {
        status: stopped ? "stopped" : "done",
        result: { split: r.split, vocab_size: r.vocab_size, n_merges: r.n_merges, n_chars: r.n_chars, n_tokens: r.n_tokens, chars_per_token: r.chars_per_token, stopped },
        text: `${how}: ${r.n_merges} merges, vocabulary ${r.vocab_size} (${r.base_size} characters + merges); ` +
          `${r.n_chars.toLocaleString("en")} characters are ${r.n_tokens.toLocaleString("en")} tokens, ${f3(r.chars_per_token)} characters per token.`,
      };
    },
    onError() { excerptButton.disabled = false; },
  });
  const setStatus = run.setStatus;

  // Corpus text into the box: the excerpt's own call (not a run); its errors go to their fields.
  const excerptArgs = () => ({ start: fields.input("start").value, n_chars: fields.input("n_chars").value });
  const excerptFields = { setError: (name, msg) => { if (EXCERPT.includes(name)) fields.setError(name, msg); } };
  checkOnLeave(root, { op: "data_excerpt", args: excerptArgs, fields: excerptFields, skip: () => excerptButton.disabled });
  const excerpt = async () => {
    const r = await client.call("data_excerpt", excerptArgs());
    fields.input("text").value = r.text;
    return `Loaded ${r.text.length.toLocaleString("en")} characters of the training plays.`;
  };
  const loadExcerpt = async () => {
    fields.clearErrors();
    excerptButton.disabled = true;
    $('[data-action="run"]').disabled = true;
    try {
      setStatus("ready", await excerpt(), "now");
    } catch (err) {
      if (reportError(err, { fields, setStatus })) fields.focusFirstInvalid();
    } finally {
      excerptButton.disabled = false;
      $('[data-action="run"]').disabled = false;
      if (document.activeElement === document.body || !document.activeElement) excerptButton.focus();
    }
  };

  let loaded = "";
  if (!(await run.ready(async () => { loaded = await excerpt(); }))) return;
  setStatus("ready", `${loaded} Press Learn merges.`, false);
  draw();
  excerptButton.disabled = false;
  excerptButton.addEventListener("click", loadExcerpt);
  split.addEventListener("change", draw);
}
