// benefit.js: the benefit study page. While the study runs it follows
// GET /api/v1/benefit-studies/{id} (the application's benefit.show)
// every 2 s, updates the progress bar and stage, and reloads the page
// when the study ends. A finished study's #benefit-charts carries the
// report's run means per mode as JSON (data-charts, written by the
// server); two charts are drawn with the vendored uPlot: the run-mean
// part weight per run of each mode against the target and the spec
// band, and |run mean − target| per run. Drag zooms, double-click
// resets, the legend shows the values under the cursor in grams. When
// both are drawn the server's SVG plots are hidden (they stay for a
// browser without scripts).
(function () {
  "use strict";
  var status = document.getElementById("benefit-status");
  if (status && status.dataset.status === "running") {
    var id = status.dataset.id;
    var follow = function () {
      fetch("/api/v1/benefit-studies/" + encodeURIComponent(id), { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (s) {
          if (!s) { setTimeout(follow, 4000); return; }
          if (s.status !== "running") { location.reload(); return; }
          var pct = Math.round(100 * (s.progress || 0));
          var bar = document.getElementById("benefit-progress");
          if (bar) { bar.value = pct; }
          var p = document.getElementById("benefit-pct");
          if (p) { p.textContent = pct + "%"; }
          var st = document.getElementById("benefit-stage");
          if (st && s.stage) { st.textContent = s.stage; }
          status.dataset.polls = String(+(status.dataset.polls || 0) + 1);
          setTimeout(follow, 2000);
        })
        .catch(function () { setTimeout(follow, 4000); });
    };
    setTimeout(follow, 2000);
  }

  var box = document.getElementById("benefit-charts");
  if (!box || !window.uPlot) { return; }
  var doc;
  try { doc = JSON.parse(box.dataset.charts); } catch (e) { box.dataset.state = "error"; return; }
  var colours = { fixed: "#d55e00", per_move: "#cc79a7", envelope: "#0072b2", oracle: "#009e73" };
  function fmt(v) { return v == null || !isFinite(v) ? "–" : String(+v.toPrecision(5)) + " g"; }
  var n = 0;
  doc.modes.forEach(function (m) { n = Math.max(n, m.runMeans.length); });
  var x = [];
  for (var i = 1; i <= n; i++) { x.push(i); }
  var width = Math.max(320, Math.min(620, (box.clientWidth || 1200) / 2 - 16));
  var val = function (u, v) { return fmt(v); };
  function chart(title, ylabel, key, limits) {
    var series = [{ label: "run" }];
    var data = [x];
    doc.modes.forEach(function (m) {
      series.push({ label: m.name, stroke: colours[m.name] || "#000", width: 2, points: { show: n <= 30 }, value: val });
      data.push(m[key]);
    });
    limits.forEach(function (l) {
      series.push({ label: l.name + " = " + fmt(l.y), stroke: l.colour, dash: l.dash, points: { show: false }, value: val });
      data.push(x.map(function () { return l.y; }));
    });
    var fig = document.createElement("figure");
    fig.className = "plot benefit-chart";
    fig.dataset.chart = key;
    box.appendChild(fig);
    new uPlot({ title: title, width: width, height: 280, scales: { x: { time: false } },
      axes: [{ label: "run", incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500] }, { label: ylabel + " [g]", size: 60 }], series: series }, data, fig);
  }
  chart("Run-mean part weight per run", "run-mean part weight", "runMeans", [
    { name: "target", y: doc.target, colour: "#000", dash: [10, 3, 2, 3] },
    { name: "spec low", y: doc.specLow, colour: "#c0392b", dash: [2, 3] },
    { name: "spec high", y: doc.specHigh, colour: "#c0392b", dash: [2, 3] }]);
  chart("|run mean − target| per run", "|run mean − target|", "absError", [
    { name: "spec half-width", y: doc.specHigh - doc.target, colour: "#c0392b", dash: [2, 3] }]);
  box.dataset.state = "ready";
  box.dataset.drawn = "2";
  var svg = document.getElementById("benefit-svg");
  if (svg) { svg.hidden = true; svg.style.display = "none"; } // .plots sets display: grid
})();
