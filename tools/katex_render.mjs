// Render TeX to HTML with KaTeX, for build.py: reads [{tex, display}] as JSON on stdin and
// writes the list of HTML strings as JSON on stdout. Bad TeX exits non-zero with the message.
import katex from "katex";

let input = "";
process.stdin.setEncoding("utf8");
for await (const chunk of process.stdin) input += chunk;
const items = JSON.parse(input);
const out = [];
for (const { tex, display } of items) {
  try {
    out.push(katex.renderToString(tex, { displayMode: display, throwOnError: true }));
  } catch (e) {
    process.stderr.write(`bad TeX ${JSON.stringify(tex)}: ${e.message}\n`);
    process.exit(1);
  }
}
process.stdout.write(JSON.stringify(out));
