// Live BPE (pylib.bpe through pylib.web.data_ops's data_bpe_* ops, chunked and stoppable).
// Merges and tokens are shown with textContent: pasted markup stays text.

import { invalidMarker, readConfig, readoutMap, startPython, statusSetter, widgetParts, wireStop } from "../widget-kit.js";
import { lineChart } from "./data-svg.js";

const SHOWN = { "\n": "↵", " ": "␣" };
const show = (s) => [...s].map((ch) => SHOWN[ch] ?? ch).join("");

export async function mount(root, client) {
  const { $, form, message, runButton, stopButton } = widgetParts(root);
  const config = readConfig(root);
  const excerptButton = $('[data-action="excerpt"]');
  const mergesList = $('[data-role="merges"]');
  const tokensBox = $('[data-role="tokens"]');
  const chart = $('[data-role="chart"]');
  const readouts = readoutMap(root);
  const setStatus = statusSetter(root, message);
  const fields = ["text", "start", "n_chars", "vocab_size"];
  const markInvalid = invalidMarker(fields, (name) => form.elements[name]);
  let running = false;
  let curve = { xs: [], ys: [] };

  const draw = () => {
    const series = [{ xs: curve.xs, ys: curve.ys, color: "#2a5db0" }];
    const measured = form.elements.split.checked ? config.measured_split : config.measured;
    if (measured) series.push({ xs: measured.vocab_size.filter((_, i) => i % 16 === 0), ys: measured.chars_per_token.filter((_, i) => i % 16 === 0), color: "#d9480f", dots: true });
    lineChart(chart, series, { xlabel: "vocabulary size", ylabel: "chars per token", ymin: 1 });
  };

  const loadExcerpt = async () => {
    markInvalid(null);
    try {
      const r = await client.call("data_excerpt", { start: form.elements.start.value, n_chars: form.elements.n_chars.value });
      form.elements.text.value = r.text;
      setStatus("ready", `Loaded ${r.text.length.toLocaleString("en")} characters of the training plays.`);
    } catch (err) {
      markInvalid(err.errors);
      setStatus("error", err.message);
    }
  };

  if (!(await startPython(client, setStatus, [runButton, excerptButton]))) return;
  await loadExcerpt();
  draw();
  runButton.disabled = excerptButton.disabled = false;
  excerptButton.addEventListener("click", loadExcerpt);
  form.elements.split.addEventListener("change", () => { if (!running) draw(); });
  wireStop(stopButton, client, message, () => running);

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (running) return;
    running = true;
    runButton.disabled = excerptButton.disabled = true;
    stopButton.disabled = false;
    markInvalid(null);
    delete root.dataset.result;
    mergesList.replaceChildren();
    tokensBox.replaceChildren();
    curve = { xs: [], ys: [] };
    setStatus("running", "Counting pairs…");
    const mergeTemplate = $('template[data-role="merge"]');
    const onEvent = (ev) => {
      if (ev.kind === "start") {
        readouts.base.textContent = ev.info.base_size;
        curve = { xs: [ev.info.base_size], ys: [1] };
      } else if (ev.kind === "chunk") {
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
          readouts.cpt.textContent = last.chars_per_token.toFixed(3);
        }
        mergesList.scrollTop = mergesList.scrollHeight;
        draw();
        message.textContent = `Learning… ${ev.chunk.n_merges} merges.`;
      }
    };
    try {
      const { result: r, stopped } = await client.call("run:data_bpe", { text: form.elements.text.value, vocab_size: form.elements.vocab_size.value, split: form.elements.split.checked }, { onEvent });
      const tokTemplate = $('template[data-role="tok"]');
      tokensBox.replaceChildren(...r.tokens.map((t) => {
        const span = tokTemplate.content.firstElementChild.cloneNode(true);
        span.textContent = show(t);
        return span;
      }));
      readouts.vocab.textContent = r.vocab_size;
      readouts.tokens.textContent = r.n_tokens.toLocaleString("en");
      readouts.cpt.textContent = r.chars_per_token.toFixed(3);
      const summary = { split: r.split, vocab_size: r.vocab_size, n_merges: r.n_merges, n_chars: r.n_chars, n_tokens: r.n_tokens, chars_per_token: r.chars_per_token, stopped };
      root.dataset.result = JSON.stringify(summary);
      const how = (stopped ? "Stopped" : `Done (${r.stop_reason})`) + (r.split ? ", within pre-tokens" : "");
      setStatus(stopped ? "stopped" : "done", `${how}: ${r.n_merges} merges, vocabulary ${r.vocab_size} (${r.base_size} characters + merges); ` +
        `${r.n_chars.toLocaleString("en")} characters are ${r.n_tokens.toLocaleString("en")} tokens, ${r.chars_per_token.toFixed(3)} characters per token.`);
    } catch (err) {
      markInvalid(err.errors);
      setStatus("error", err.message);
    } finally {
      running = false;
      runButton.disabled = excerptButton.disabled = false;
      stopButton.disabled = true;
    }
  });
}
