// Brotli-compresses files for the build (builder/offline.py): reads [[source, destination], ...] as
// JSON on stdin; argv: quality, window bits. Node's zlib does it, so the build needs no brotli
// package. The files are compressed at once on libuv's thread pool; each destination is written
// through a .tmp.
import fs from "node:fs/promises";
import { promisify } from "node:util";
import zlib from "node:zlib";

const [quality, lgwin] = process.argv.slice(2).map(Number);
const compress = promisify(zlib.brotliCompress);
const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const jobs = JSON.parse(Buffer.concat(chunks).toString("utf8"));
await Promise.all(jobs.map(async ([source, destination]) => {
  const data = await fs.readFile(source);
  const out = await compress(data, {
    params: {
      [zlib.constants.BROTLI_PARAM_QUALITY]: quality,
      [zlib.constants.BROTLI_PARAM_LGWIN]: lgwin,
      [zlib.constants.BROTLI_PARAM_SIZE_HINT]: data.length,
    },
  });
  await fs.writeFile(destination + ".tmp", out);
  await fs.rename(destination + ".tmp", destination);
}));
