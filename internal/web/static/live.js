// Live job progress for the jobs pages: listens to the server's event
// stream (/api/v1/events, Server-Sent Events, same origin, the session
// cookie authenticates) and updates rows marked data-job. Events only say
// that something changed; a finished job reloads the page to show the
// stored truth (model, gates). No framework, no external code.
(function () {
  "use strict";
  var status = document.getElementById("live-status");
  if (!status || !window.EventSource) { return; }
  var rows = {};
  document.querySelectorAll("tr[data-job]").forEach(function (tr) { rows[tr.getAttribute("data-job")] = tr; });
  var es = new EventSource("/api/v1/events");
  function set(tr, sel, text) { var el = tr.querySelector(sel); if (el) { el.textContent = text; } }
  function handle(msg) {
    var ev;
    try { ev = JSON.parse(msg.data); } catch (e) { return; }
    var kind = ev.kind || msg.type;
    var tr = rows[ev.id];
    var d = ev.data || {};
    if (!tr) {
      if (kind === "job.state" && d.status === "queued" && document.body.getAttribute("data-page") === "jobs") {
        status.textContent = "New job " + ev.id + " queued: reload to see it.";
      }
      return;
    }
    if (kind === "job.progress") {
      var p = Math.round(100 * (d.progress || 0));
      var bar = tr.querySelector("progress"); if (bar) { bar.value = p; }
      set(tr, ".pct", p + "%");
      if (d.stage) { set(tr, ".stage", d.stage); }
    } else if (kind === "job.state") {
      if (d.status) { set(tr, ".status", d.status); }
      if (d.stage) { set(tr, ".stage", d.stage); }
      if (d.status === "done" || d.status === "failed" || d.status === "cancelled" || d.status === "timeout" || d.status === "interrupted") {
        setTimeout(function () { window.location.reload(); }, 500);
      }
    }
  }
  es.onopen = function () { status.textContent = "Live updates: connected."; };
  es.onerror = function () { status.textContent = "Live updates: disconnected (retrying)."; };
  es.onmessage = handle;
  ["job.progress", "job.state"].forEach(function (k) { es.addEventListener(k, handle); });
})();
