// Live page refresh: every data-every ms, fetch the page body
// (/ui/live/fragment, same origin, the session cookie authenticates) and
// swap it in. The server renders the connectors and the SVG trends, so
// this script only moves HTML; a failed fetch keeps the last body and
// says so. No framework, no external code.
(function () {
  "use strict";
  var info = document.getElementById("live-refresh");
  var body = document.getElementById("live-body");
  if (!info || !body || !window.fetch) { return; }
  var src = info.getAttribute("data-src");
  var every = parseInt(info.getAttribute("data-every"), 10) || 2000;
  var busy = false;
  function tick() {
    if (busy || document.hidden) { return; }
    busy = true;
    fetch(src, { credentials: "same-origin", cache: "no-store" }).then(function (res) {
      if (!res.ok) { throw new Error("HTTP " + res.status); }
      return res.text();
    }).then(function (html) {
      body.innerHTML = html;
      info.textContent = "Refreshing every " + every + " ms; last " + new Date().toLocaleTimeString() + ".";
      info.setAttribute("data-refreshes", String((parseInt(info.getAttribute("data-refreshes"), 10) || 0) + 1));
    }).catch(function (e) {
      info.textContent = "Refresh failed (" + e.message + "); retrying.";
    }).then(function () { busy = false; });
  }
  setInterval(tick, every);
})();
