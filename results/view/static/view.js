// Live fragments: an element with data-live="URL" is replaced by that URL's HTML every few
// seconds until the server answers X-Live: settled (the sweep has nothing left to run).
"use strict";
for (const el of document.querySelectorAll("[data-live]")) {
  const every = Number(el.dataset.every || 2000);
  const tick = async () => {
    let settled = false;
    try {
      const response = await fetch(el.dataset.live, {credentials: "same-origin"});
      if (response.ok) {
        el.innerHTML = await response.text();
        el.dataset.refreshed = String(Number(el.dataset.refreshed || 0) + 1);
        settled = response.headers.get("X-Live") === "settled";
      }
    } catch (e) {
      // The server restarting or a dropped connection: try again at the next tick.
    }
    if (!settled) setTimeout(tick, every);
  };
  if (el.dataset.settled !== "1") setTimeout(tick, every);
}
