// The colour theme: light, dark, or the system's setting (the default), remembered in localStorage.
// A classic script loaded in <head>, so that <html data-theme="light|dark"> is set before the first paint
// (no flash of the wrong theme). It keeps the header's theme buttons (button[data-theme-choice]) in step, follows
// the system setting and other tabs, and on every change of data-theme dispatches "themechange" on
// document, for the charts that draw on canvas with colours read from the CSS custom properties.
(() => {
  const KEY = "course-theme";
  const CHOICES = ["system", "light", "dark"];
  const root = document.documentElement;
  const systemDark = window.matchMedia("(prefers-color-scheme: dark)");

  function storedChoice() {
    try {
      const value = window.localStorage.getItem(KEY);
      return CHOICES.includes(value) ? value : "system";
    } catch {
      return "system"; // storage blocked (private mode, file:): follow the system
    }
  }

  let choice = storedChoice();

  function apply() {
    const theme = choice === "system" ? (systemDark.matches ? "dark" : "light") : choice;
    for (const button of document.querySelectorAll("button[data-theme-choice]")) {
      button.setAttribute("aria-pressed", String(button.dataset.themeChoice === choice));
    }
    if (root.dataset.theme !== theme) {
      const first = !root.dataset.theme;
      root.dataset.theme = theme;
      if (!first) document.dispatchEvent(new CustomEvent("themechange", { detail: { theme, choice } }));
    }
  }

  function choose(next) {
    choice = next;
    try {
      if (choice === "system") window.localStorage.removeItem(KEY);
      else window.localStorage.setItem(KEY, choice);
    } catch {
      // storage blocked: applied to this page, not remembered
    }
    apply();
  }

  apply();
  systemDark.addEventListener("change", apply);
  window.addEventListener("storage", (event) => { if (event.key === KEY || event.key === null) { choice = storedChoice(); apply(); } });
  document.addEventListener("click", (event) => {
    const button = event.target.closest && event.target.closest("button[data-theme-choice]");
    if (button && CHOICES.includes(button.dataset.themeChoice)) choose(button.dataset.themeChoice);
  });
  // The switch is hidden in the markup: it only works with this script, which shows it once the page has parsed.
  document.addEventListener("DOMContentLoaded", () => {
    apply();
    for (const group of document.querySelectorAll("[data-role=theme-switch]")) group.hidden = false;
  });
})();
