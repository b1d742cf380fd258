// The vocabulary grid and the live tokenizer: a thin view over pylib.web's vocab_table and tokenize
// (pylib.data.CharVocab.encode). Text from the reader is only ever shown with textContent.

import { readConfig, startPython, statusSetter, widgetParts } from "../widget-kit.js";

const SHOWN = { "\n": "↵", " ": "␣", "\t": "⇥" }; // how invisible characters look in a token chip
const NAMES = { "\n": "newline", " ": "space", "\t": "tab" };

export async function mount(root, client) {
  const { $, form, message, runButton } = widgetParts(root);
  const config = readConfig(root);
  const textarea = $('[data-role="text"]');
  const summary = $('[data-role="summary"]');
  const tokens = $('[data-role="tokens"]');
  const dropped = $('[data-role="dropped"]');
  const tokenTemplate = $('template[data-role="token"]');
  const cellTemplate = $('template[data-role="vocab-cell"]');
  let eosId = config.vocab_size - 1;

  const setStatus = statusSetter(root, message);

  let vocab;
  if (!(await startPython(client, setStatus, [runButton], async () => { vocab = await client.call("vocab"); }))) return;

  const grid = $('[data-role="vocab"]');
  grid.replaceChildren(
    ...vocab.map((row) => {
      const cell = cellTemplate.content.firstElementChild.cloneNode(true);
      cell.querySelector(".vocab-id").textContent = row.id;
      const label = row.name ? (row.id === vocab.length - 1 ? "EOS" : row.name) : row.char;
      cell.querySelector(".vocab-char").textContent = label;
      if (row.name) {
        cell.classList.add("named");
        cell.title = row.name;
      }
      return cell;
    }),
  );
  eosId = vocab[vocab.length - 1].id;

  let sequence = 0;
  async function tokenize() {
    const mine = ++sequence;
    const text = textarea.value;
    root.dataset.status = "running";
    try {
      const r = await client.call("tokenize", { text });
      if (mine !== sequence) return;
      tokens.replaceChildren(
        ...r.ids.map((id, i) => {
          const chip = tokenTemplate.content.firstElementChild.cloneNode(true);
          const ch = r.chars[i];
          chip.querySelector(".token-char").textContent = SHOWN[ch] ?? ch;
          chip.querySelector(".token-id").textContent = id;
          chip.title = NAMES[ch] ?? ch;
          if (id === eosId) chip.classList.add("eos");
          return chip;
        }),
      );
      const more = r.truncated ? ` (the first ${r.ids.length.toLocaleString("en")} are shown)` : "";
      summary.textContent = `${r.n_chars.toLocaleString("en")} characters → ${r.n_tokens.toLocaleString("en")} tokens${more}.`;
      if (r.n_dropped) {
        const kinds = r.dropped.map((d) => `“${d.char}” (${d.codepoint})`).join(", ");
        const extra = r.n_dropped_kinds > r.dropped.length ? ", …" : "";
        dropped.textContent = `${r.n_dropped.toLocaleString("en")} character${r.n_dropped === 1 ? "" : "s"} dropped as outside the vocabulary: ${kinds}${extra}.`;
      } else {
        dropped.textContent = "No characters dropped: every character is in the vocabulary.";
      }
      root.dataset.result = JSON.stringify({ ids: r.ids, n_tokens: r.n_tokens, n_dropped: r.n_dropped, truncated: r.truncated });
      textarea.removeAttribute("aria-invalid");
      setStatus("done", "");
    } catch (err) {
      if (mine !== sequence) return;
      tokens.replaceChildren();
      summary.textContent = "";
      dropped.textContent = "";
      delete root.dataset.result;
      if (err.kind === "input") textarea.setAttribute("aria-invalid", "true");
      setStatus("error", err.errors ? Object.values(err.errors).join("\n") : err.message);
    }
  }

  let timer = null;
  textarea.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(tokenize, 150);
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    clearTimeout(timer);
    tokenize();
  });
  runButton.disabled = false;
  await tokenize();
}
