// The vocabulary grid and the live tokenizer: a thin view over pylib.web's vocab_table and tokenize
// (pylib.data.CharVocab.encode), through the kit's calculator (one call per edit, the latest wins).
// Text from the reader is only ever shown with textContent.

import { bindFields, calculator, readConfig } from "../widget-kit.js";
import { keepFocus } from "./data-svg.js";

const SHOWN = { "\n": "↵", " ": "␣", "\t": "⇥" }; // how invisible characters look in a token chip
const NAMES = { "\n": "newline", " ": "space", "\t": "tab" };

export async function mount(root, client) {
  const $ = (sel) => root.querySelector(sel);
  const config = readConfig(root);
  const tokens = $('[data-role="tokens"]');
  const dropped = $('[data-role="dropped"]');
  const tokenTemplate = $('template[data-role="token"]');
  const cellTemplate = $('template[data-role="vocab-cell"]');
  let eosId = config.vocab_size - 1;

  const fields = bindFields(root);
  const clear = () => {
    tokens.replaceChildren();
    dropped.textContent = "";
  };
  const calc = calculator(root, client, {
    op: "tokenize",
    fields,
    args: () => ({ text: fields.input("text").value }),
    onError: clear,
    onResult(r) {
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
      if (r.n_dropped) {
        const kinds = r.dropped.map((d) => `“${d.char}” (${d.codepoint})`).join(", ");
        const extra = r.n_dropped_kinds > r.dropped.length ? ", …" : "";
        dropped.textContent = `${r.n_dropped.toLocaleString("en")} character${r.n_dropped === 1 ? "" : "s"} dropped as outside the vocabulary: ${kinds}${extra}.`;
      } else {
        dropped.textContent = "No characters dropped: every character is in the vocabulary.";
      }
      const more = r.truncated ? ` (the first ${r.ids.length.toLocaleString("en")} are shown)` : "";
      return {
        text: `${r.n_chars.toLocaleString("en")} characters → ${r.n_tokens.toLocaleString("en")} tokens${more}.`,
        result: { ids: r.ids, n_tokens: r.n_tokens, n_dropped: r.n_dropped, truncated: r.truncated },
      };
    },
  });
  keepFocus(root);

  let vocab;
  if (!(await calc.ready(async () => { vocab = await client.call("vocab"); }))) return;

  $('[data-role="vocab"]').replaceChildren(
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

  fields.input("text").addEventListener("input", () => calc.soon(150));
  await calc.run();
}
