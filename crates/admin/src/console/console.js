// The console's one script (CSP script-src 'self'): the pending list
// follows the event stream. On each event it fetches this same page and
// swaps in the server's newly rendered list; it builds no markup itself,
// so all escaping stays on the server. Without it the pages still work,
// reloaded by hand.
"use strict";
// A minted token's copy button copies its field's value, nothing around it.
document.querySelectorAll("button.copy[data-copy]").forEach(function (button) {
  button.addEventListener("click", async function () {
    const field = document.getElementById(button.dataset.copy);
    if (!field) {
      return;
    }
    field.select();
    try {
      await navigator.clipboard.writeText(field.value);
      button.textContent = "Copied";
    } catch (e) {
      // No clipboard API (plain HTTP, an old browser): the value stays selected.
      button.textContent = "Selected: press Ctrl+C";
    }
  });
});
(function () {
  const status = document.getElementById("live-status");
  if (!document.getElementById("live") || !window.EventSource || !status) {
    return;
  }
  let fetching = false;
  let again = false;
  async function refresh() {
    if (fetching) {
      again = true;
      return;
    }
    fetching = true;
    try {
      const answer = await fetch(window.location.href, { credentials: "same-origin", cache: "no-store" });
      if (answer.ok) {
        const page = new DOMParser().parseFromString(await answer.text(), "text/html");
        const fresh = page.getElementById("live");
        const current = document.getElementById("live");
        if (fresh && current) {
          current.replaceWith(document.adoptNode(fresh));
        }
      }
    } finally {
      fetching = false;
      if (again) {
        again = false;
        refresh();
      }
    }
  }
  const events = new EventSource("/console/events");
  events.addEventListener("open", function () {
    status.textContent = "following new announcements";
    refresh();
  });
  events.addEventListener("changed", refresh);
  events.addEventListener("error", function () {
    status.textContent = events.readyState === EventSource.CLOSED ? "not following (reload the page)" : "reconnecting";
  });
})();
