// tube.js: the trial page's interactive charts. #trial-tube carries the
// recomputed trial's traces as JSON (data-tube, written by the server);
// each trace is drawn with the vendored uPlot: the candidate's mean and
// its tube (a filled band), the baseline of holding the setpoints
// (dashed), the scene's limits and the objective's target. Drag zooms,
// double-click resets, the legend shows the values under the cursor with
// the quantity's unit. When every chart is drawn the server's SVG plots
// are hidden (they stay for a browser without scripts).
(function () {
  "use strict";
  var box = document.getElementById("trial-tube");
  if (!box || !window.uPlot) { return; }
  var doc;
  try { doc = JSON.parse(box.dataset.tube); } catch (e) { box.dataset.state = "error"; return; }
  function fmt(v) {
    if (v == null || !isFinite(v)) { return "–"; }
    var a = Math.abs(v);
    if (a !== 0 && (a >= 1e6 || a < 1e-3)) { return v.toExponential(3); }
    return String(+v.toPrecision(5));
  }
  var width = Math.max(320, Math.min(620, (box.clientWidth || 1200) / 2 - 16));
  var drawn = 0;
  doc.traces.forEach(function (tr) {
    var unit = tr.unit ? " " + tr.unit : "";
    var val = function (u, v) { return v == null ? "–" : fmt(v) + unit; };
    var series = [{ label: "t [s]" }, { label: "candidate", stroke: "#0072b2", width: 2, value: val }];
    var data = [tr.x, tr.mean];
    var bands = [];
    if (tr.lower && tr.upper) {
      series.push({ label: "tube low", stroke: "rgba(0,114,178,0.35)", value: val });
      series.push({ label: "tube high", stroke: "rgba(0,114,178,0.35)", value: val });
      data.push(tr.lower, tr.upper);
      bands.push({ series: [3, 2], fill: "rgba(0,114,178,0.15)" });
    }
    if (tr.baseline && tr.baseline.length) {
      series.push({ label: "baseline (hold)", stroke: "#d55e00", dash: [6, 4], value: val });
      data.push(tr.baseline);
    }
    // The y range is the trajectories' (and the target's): a limit far
    // outside it would squash the tube to a line, so it is named in the
    // legend as off scale instead of drawn.
    var lo = Infinity, hi = -Infinity;
    data.slice(1).forEach(function (col) { col.forEach(function (v) { if (v != null && isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); } }); });
    (tr.limits || []).forEach(function (l) { if (l.name === "objective target") { lo = Math.min(lo, l.y); hi = Math.max(hi, l.y); } });
    var pad = (hi - lo) * 0.08 || Math.abs(hi) * 0.01 || 1;
    lo -= pad; hi += pad;
    (tr.limits || []).forEach(function (l) {
      var target = l.name === "objective target";
      var off = l.y < lo ? " (off scale, below)" : l.y > hi ? " (off scale, above)" : "";
      series.push({ label: l.name + " = " + fmt(l.y) + unit + off, stroke: target ? "#009e73" : "#c0392b", dash: target ? [10, 3, 2, 3] : [2, 3],
        show: !off, value: val });
      data.push(tr.x.map(function () { return l.y; }));
    });
    var fig = document.createElement("figure");
    fig.className = "plot tube-chart";
    fig.dataset.trace = tr.id;
    box.appendChild(fig);
    var title = tr.id + " (" + tr.kind + (tr.calibrated ? ", calibrated tube" : "") + ")";
    new uPlot({ title: title, width: width, height: 260, bands: bands, scales: { x: { time: false }, y: { range: [lo, hi] } },
      axes: [{ label: "time after the snapshot [s]" }, { label: tr.id + (tr.unit ? " [" + tr.unit + "]" : ""), size: 60 }],
      series: series }, data, fig);
    drawn++;
  });
  box.dataset.state = "ready";
  box.dataset.charts = String(drawn);
  var svg = document.getElementById("trial-plots");
  if (svg && drawn > 0) { svg.hidden = true; }
})();
