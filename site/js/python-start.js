// Creates the page's Python worker (static/js/worker.js) and sends it "init": a classic, blocking
// script in <head>, so that on a page the build marked html[data-widgets] Python starts before the
// body is parsed. A module script (pyodide-client.js, async) runs only once the parser yields, which
// on a long chapter is after the whole body: measured, the worker then started about 0.2 s later.
//
// On a page marked data-widgets="on-demand" (the index) nothing starts here: its widget starts Python
// when the reader presses Start (widget-kit.js's runStreamed).
//
// window.__coursePython.start() creates the worker once and returns {worker, takeOver}; takeOver()
// stops keeping the worker's events and returns those kept so far (message and error events, in
// order), for pyodide-client.js's listeners to replay. start() throws if a worker cannot be made.
(() => {
  const html = document.documentElement;
  let started = null;

  function start() {
    if (started) return started;
    const root = new URL(html.dataset.siteRoot || "./", document.baseURI).href;
    const early = [];
    const keep = (event) => {
      if (event.type === "error") event.preventDefault(); // pyodide-client.js reports it on the page
      early.push(event);
    };
    performance.mark("course-worker-created"); // for bench/bench_load.py
    const worker = new Worker(new URL("static/js/worker.js", root), { type: "module" });
    worker.addEventListener("message", keep);
    worker.addEventListener("error", keep);
    let afresh = false; // the last start in this tab was slow (pyodide-client.js: SLOW_START_KEY)
    try {
      afresh = sessionStorage.getItem("course-python-boot-afresh") === "1";
    } catch {
      // no storage
    }
    worker.postMessage({
      type: "init",
      afresh,
      pyodideURL: new URL("pyodide/", root).href,
      wheelURL: new URL(html.dataset.wheel, root).href,
      numpyURL: new URL(html.dataset.numpy, root).href,
      dataURL: new URL("data/", root).href,
    });
    started = {
      worker,
      takeOver() {
        worker.removeEventListener("message", keep);
        worker.removeEventListener("error", keep);
        return early.splice(0);
      },
    };
    return started;
  }

  let failure = null; // a worker that could not be made here is reported by pyodide-client.js
  window.__coursePython = {
    start() {
      if (failure) throw failure;
      return start();
    },
  };
  if (html.hasAttribute("data-widgets") && html.dataset.widgets !== "on-demand") {
    try {
      start();
    } catch (err) {
      failure = err;
    }
  }
})();
